"""`--drain-cmd TEMPLATE`: tell a scheduler about each failed host (e.g. Slurm's scontrol).

The template is split into words like a shell would (shlex) BEFORE the values are put in, and run
without a shell: a host name or a reason can never become part of a command, whatever it contains.

For Slurm, `--drain-failed` (provisioner/scheduler/) does the same through the inventory's controller
over SSH, and `--resume-fixed` lifts fabnet's own drains; this template stays for other schedulers and
for a controller fabnet does not reach.
"""

from __future__ import annotations

import shlex
import string
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("host", "reason", "busbw")


@dataclass(frozen=True)
class Drained:
    host: str
    argv: list[str]
    exit_code: int | None
    output: str

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "command": shlex.join(self.argv), "exit_code": self.exit_code,
                "output": self.output}


def check_template(template: str) -> None:
    """Raise ValueError for a template that cannot be split or names an unknown field."""
    words = shlex.split(template)
    if not words:
        raise ValueError("the drain command is empty")
    for word in words:
        for _text, name, _spec, _conv in string.Formatter().parse(word):
            if name is not None and name not in FIELDS:
                raise ValueError(f"unknown field {{{name}}} in the drain command; allowed: "
                                 + ", ".join("{" + f + "}" for f in FIELDS))


def render(template: str, values: Mapping[str, str]) -> list[str]:
    """The argument list for one host. `{host}`, `{reason}`, `{busbw}` may appear inside any word."""
    check_template(template)
    safe = {k: str(values.get(k, "")) for k in FIELDS}
    return [word.format_map(safe) for word in shlex.split(template)]


def run(template: str, host: str, reason: str, busbw: float | None, timeout: float = 60.0) -> Drained:
    argv = render(template, {"host": host, "reason": reason, "busbw": "" if busbw is None else f"{busbw:.3f}"})
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return Drained(host, argv, None, f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return Drained(host, argv, None, f"did not finish in {timeout:.0f} s")
    return Drained(host, argv, proc.returncode, (proc.stdout + proc.stderr).strip()[-500:])
