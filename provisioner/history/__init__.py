"""The run history: every audit, apply, smoke and watch cycle, kept in one SQLite file."""
