"""Standard output without rich: JSON for programs, and one clear error when nobody is reading.

`fabnet parse` and every `--json` print through here; loading rich (about 20 ms) is left to the
commands that draw tables.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from provisioner.errors import ReaderGone
from provisioner.output.core import clean_data
from provisioner.output.files import OutputError


def quiet() -> None:
    """Point standard output at /dev/null, so that nothing written later (the interpreter's own flush
    at exit included) fails again on a reader that has gone."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no stdout at all: nothing will be flushed either
        pass


def broken_pipe() -> None:
    quiet()
    raise ReaderGone("standard output was closed by its reader (broken pipe)")


@contextmanager
def writing() -> Iterator[None]:
    """Writes to standard output that end in one clear error when it is closed or unwritable."""
    if sys.stdout is None:
        raise OutputError("standard output is closed: nothing can be printed (redirect it to a file instead)")
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        broken_pipe()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise OutputError(f"cannot write to standard output: {reason}") from None


def print_json(data: Any) -> None:
    """Every `--json` document: its strings cleaned here, once, so a program reads the same visible
    escapes the terminal shows (`\\x1b`, `\\u202e`), never a control character."""
    # ensure_ascii as well: the document itself stays plain ASCII whatever the hosts printed.
    with writing():
        sys.stdout.write(json.dumps(clean_data(data), indent=2, sort_keys=False, ensure_ascii=True) + "\n")
