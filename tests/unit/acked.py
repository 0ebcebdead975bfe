"""`sh -s` fed here as a host's shell is fed by apply: the framed change script, then, once its `armed`
marker shows on standard output, the one line that acknowledges it (transport.run(shorten_after=...))."""

from __future__ import annotations

import subprocess
import tempfile

from provisioner.run.transport import framed


def run_acked(script: str, *, env: dict[str, str] | None = None, timeout: float = 30
              ) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                text=True, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(framed(script))
        proc.stdin.flush()
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if ":armed:" in line and line.startswith("@@fabnet:") and not proc.stdin.closed:
                proc.stdin.write("\n")
                proc.stdin.close()
        if not proc.stdin.closed:
            proc.stdin.close()
        code = proc.wait(timeout=timeout)
        errors.seek(0)
        return subprocess.CompletedProcess(["sh", "-s"], code, "".join(lines), errors.read())
