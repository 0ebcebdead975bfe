"""`explain` on Slurm's mpi/pmix plugin failing at its UNIX socket: a stepd that could not create its own
(SlurmdSpoolDir/stepd.slurm.pmix.JOB.STEP), and a message another node's slurmd could not hand to it. The lines are
built by hand from the plugin's wording, 16.05 to 25.11: pmixp_utils.c's `pmixp_usock_create_srv` (`UNIX socket
path is too long: %lu, max %lu`, `Cannot bind() UNIX socket %s`, each followed by PMIXP_ERROR_STD's `: strerror
(errno)`) and `send failed, rc=%d, exceeded the retry limit`, and pmixp_server.c's bare `pmixp_usock_create_srv`
when pmixp_stepd_init fails.
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause

PRE = "slurmstepd: error:  mpi/pmix_v5: "


def _causes(*texts: str) -> list[Cause]:
    return explain([("job.log", "\n".join(texts))]).causes


@pytest.mark.parametrize(("line", "says"), [
    (PRE + "pmixp_usock_create_srv: gpu-a01 [0]: pmixp_utils.c:105: Cannot bind() UNIX socket "
     "/var/spool/slurmd/stepd.slurm.pmix.656.0: Address already in use (98)",
     "/var/spool/slurmd/stepd.slurm.pmix.656.0: Address already in use"),
    (PRE + "pmixp_usock_create_srv: gpu-a01 [0]: pmixp_utils.c:89: UNIX socket path is too long: 131, max 107: "
     "Success (0)", "107 characters"),
    (PRE + "pmixp_stepd_init: gpu-a01 [0]: pmixp_server.c:388: pmixp_usock_create_srv", "SlurmdSpoolDir"),
    # Before 20.11.4: `HOST [ID] FILE:LINE [FUNC] mpi/pmix: ERROR: ...`.
    ("error: gpu-a01 [0] pmixp_utils.c:108 [pmixp_usock_create_srv] mpi/pmix: ERROR: Cannot bind() UNIX socket "
     "/var/spool/slurmd/stepd.slurm.pmix.656.0: Permission denied (13)", "Permission denied"),
])
def test_the_stepd_socket_it_could_not_create(line: str, says: str) -> None:
    causes = _causes(line)
    assert [c.id for c in causes] == ["pmix-wireup-failed"], causes  # EADDRINUSE on a UNIX socket is no port
    top = causes[0]
    assert top.id == "pmix-wireup-failed" and top.hosts == ["gpu-a01"], top
    assert "could not create its socket on gpu-a01" in top.title, top.title
    assert says in " ".join([top.detail, top.fix]), top.detail


def test_what_the_relaying_slurmd_answered() -> None:
    top = _causes(PRE + "pmixp_p2p_send: gpu-a01 [0]: pmixp_utils.c:450: send failed, rc=2, exceeded the retry "
                  "limit")[0]
    assert top.id == "pmix-wireup-failed" and "the step's socket was not there" in top.detail, top.detail
