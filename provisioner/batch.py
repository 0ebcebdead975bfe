"""One SSH exec per host: join many read-only probes into one POSIX shell script, and split its output.

Each probe runs in its own `sh -c` under `timeout`, with stdout streamed through and stderr captured,
between marker lines carrying a per-run random nonce, so nothing a probe prints can forge a boundary.
A probe that fails, hangs or prints garbage affects only its own result.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence

from provisioner.resources.base import Probe, ProbeResult

TIMEOUT_EXIT = 124


def new_nonce() -> str:
    return secrets.token_hex(8)


def build_script(probes: Sequence[Probe], nonce: str) -> str:
    """The script for one host. Probes with the same key are run once."""
    lines = [
        # `timeout` is coreutils; without it probes still run, only unbounded.
        'if command -v timeout >/dev/null 2>&1; then __fn_t=timeout; else __fn_t=""; fi',
    ]
    seen: set[str] = set()
    for probe in probes:
        if probe.key in seen:
            continue
        seen.add(probe.key)
        limit = f"{probe.timeout:g}"
        tag = f"@@fabnet:{nonce}"
        lines += [
            f"printf '%s\\n' '{tag}:begin:{probe.key}@@'",
            # fd 3 carries the probe's stdout straight out; its stderr is captured into __fn_e.
            "{ __fn_e=$(${__fn_t:+$__fn_t -k 2 " + limit + "} sh -c " + shlex.quote(probe.command)
            + " 2>&1 1>&3 3>&- </dev/null); __fn_rc=$?; } 3>&1",
            f"printf '\\n%s:%s@@\\n' '{tag}:rc:{probe.key}' \"$__fn_rc\"",
            "printf '%s\\n' \"$__fn_e\"",
            f"printf '%s\\n' '{tag}:end:{probe.key}@@'",
        ]
    return "\n".join(lines) + "\n"


def split_output(stdout: str, nonce: str) -> dict[str, ProbeResult]:
    """Probe key -> result, for every probe whose block is complete in `stdout`."""
    tag = re.escape(f"@@fabnet:{nonce}")
    pattern = re.compile(
        rf"{tag}:begin:(?P<key>[0-9a-f]+)@@\n(?P<out>.*?)\n{tag}:rc:(?P=key):(?P<rc>\d+)@@\n"
        rf"(?P<err>.*?)\n{tag}:end:(?P=key)@@",
        re.DOTALL,
    )
    return {
        match["key"]: ProbeResult(stdout=match["out"], stderr=match["err"], exit_code=int(match["rc"]))
        for match in pattern.finditer(stdout)
    }


def wrap_become(script: str, user: str = "root") -> str:
    """Run the whole script through sudo (non-interactive: a password prompt would hang the exec)."""
    return " ".join(shlex.quote(p) for p in ("sudo", "-n", "-H", "-u", user, "--", "sh", "-c", script))
