"""Apply: one change script per host (lock, compare-and-swap, undo, journal), its recovery
after an exec that ended early, and rollback."""
