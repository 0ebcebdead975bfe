"""Facts: every resource's read command joined into one script, run in one exec per host."""
