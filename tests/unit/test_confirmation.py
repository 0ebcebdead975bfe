"""Whether a guarded change lost its session's path, from what its exec saw: the exec hung after the `armed`
marker, or the cut held the marker itself back until the host's own revert brought the path back."""

from __future__ import annotations

import pytest

from provisioner.apply.confirmation import path_lost
from provisioner.run.transport import ExecResult

REVERT = 10


@pytest.mark.parametrize(("result", "lost"), [
    # The marker came, then nothing: run gave up half the revert time later.
    (ExecResult("", "", -1, 7.0, "timeout", cut=True, marked_at=2.0), True),
    # The path went down before sshd sent the marker: everything came at once after the revert (10 s).
    (ExecResult("", "", 0, 11.5, "exited", marked_at=11.4), True),
    # The session kept its path: the marker came early and the exec ended soon after.
    (ExecResult("", "", 0, 2.5, "exited", marked_at=1.0), False),
    # A later step ran long after an early marker: the session held; the confirmation came too late.
    (ExecResult("", "", 0, 30.0, "exited", marked_at=1.0), False),
    # Quick and whole, marker last: nothing was held back (the exec ended well within the revert time).
    (ExecResult("", "", 0, 1.2, "exited", marked_at=1.1), False),
    # No guarded change at all.
    (ExecResult("", "", 0, 12.0, "exited"), False),
])
def test_path_lost(result: ExecResult, lost: bool) -> None:
    assert path_lost(result, REVERT) is lost
