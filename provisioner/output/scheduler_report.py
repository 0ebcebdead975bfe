"""What `audit`, `apply` and `smoke` say they told the scheduler: one line per drain or resume on stderr
(--json output stays one document). A Slurm reason is free text and may span lines: each line shows it
whole, its line breaks written as `\\n`, so none of its lines can pass for another line of the report."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from provisioner.output.core import one_line


def settled(actions: Sequence[Any], error: str | None, scheduler: str) -> None:
    """Each drain.Action's line, then the error that kept the scheduler from being asked, if any."""
    for action in actions:
        print(one_line(action.line()), file=sys.stderr, flush=True)
    if error:
        print(one_line(f"error: {scheduler}: {error}"), file=sys.stderr, flush=True)
