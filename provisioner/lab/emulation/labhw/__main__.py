#!/usr/bin/python3
"""Run the emulation: `python3 -I -S DIR --as NAME [ARGS...]`, or through a link named after the command."""

import contextlib
import os
import sys

# Run as a directory, this file is a script, not part of a package: put the directory's parent first on
# the path so the tools import as the package `labhw` (realpath: argv[0] may be a link named after a tool).
sys.path[0] = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

from labhw.main import main  # noqa: E402

if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `... | head` closing the pipe early is not an error of the tool.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        sys.exit(0)
