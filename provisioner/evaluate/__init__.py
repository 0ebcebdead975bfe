"""Evaluate: facts -> checks (drift) per resource, fleet-wide checks, and the audit of a fleet."""
