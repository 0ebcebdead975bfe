"""Plan: drifted resources -> ordered remedy steps per host, and plans saved to apply later."""
