"""kernel_module: `lsmod` for now, modules-load.d and /etc/modules for boot."""

from __future__ import annotations

import pytest

from provisioner.resources import kernel_module
from provisioner.resources.kernel_module import boot_listed, parse_lsmod

from ._recorded import LSMOD, NOT_FOUND, failed, listing, run

BOOT = "/etc/modules-load.d/"  # a fragment of the boot-list probe's command

CASES = [
    pytest.param({"name": "mlx5_ib"},
                 {"lsmod": LSMOD, BOOT: listing({"/etc/modules-load.d/rdma.conf": "# RDMA\nmlx5_ib\nib_umad\n"})},
                 [("loaded", "ok", "loaded", "loaded"),
                  ("persistent", "ok", "listed", "listed in /etc/modules-load.d/rdma.conf")],
                 id="in-sync"),
    pytest.param({"name": "nvidia_peermem"}, {"lsmod": LSMOD, BOOT: ""},
                 [("loaded", "drift", "loaded", "absent"), ("persistent", "drift", "listed", "not listed")],
                 id="not-loaded-not-listed"),
    pytest.param({"name": "nvidia-peermem"},
                 {"lsmod": LSMOD + "nvidia_peermem         16384  0\n",
                  BOOT: listing({"/etc/modules": "# /etc/modules\nloop\nnvidia-peermem\n"})},
                 [("loaded", "ok", "loaded", "loaded"), ("persistent", "ok", "listed", "listed in /etc/modules")],
                 id="dash-and-underscore-are-one"),
    pytest.param({"name": "overlay", "state": "absent"},
                 {"lsmod": LSMOD, BOOT: listing({"/usr/lib/modules-load.d/docker.conf": "overlay\nbr_netfilter\n"})},
                 [("loaded", "drift", "absent", "loaded"),
                  ("persistent", "drift", "not listed", "listed in /usr/lib/modules-load.d/docker.conf")],
                 id="wanted-absent"),
    pytest.param({"name": "overlay", "state": "absent"},
                 {"lsmod": LSMOD, BOOT: listing({"/etc/modules-load.d/docker.conf": "# masked\n",
                                                 "/usr/lib/modules-load.d/docker.conf": "overlay\n"})},
                 [("loaded", "drift", "absent", "loaded"), ("persistent", "ok", "not listed", "not listed")],
                 id="etc-hides-usr-lib-file-of-same-name"),
    pytest.param({"name": "nvidia_peermem", "persistent": False}, {"lsmod": LSMOD},
                 [("loaded", "drift", "loaded", "absent")], id="not-persistent-one-probe"),
    pytest.param({"name": "mlx5_ib"}, {"lsmod": NOT_FOUND, BOOT: listing({"/etc/modules": "mlx5_ib\n"})},
                 [("loaded", "error", "loaded", None), ("persistent", "ok", "listed", "listed in /etc/modules")],
                 id="lsmod-missing-is-an-error-of-loaded-only"),
    pytest.param({"name": "mlx5_ib", "persistent": False}, {"lsmod": "Module Size Used by\nmlx5_ib lots 0\n"},
                 [("loaded", "error", "loaded", None)], id="lsmod-garbage"),
    pytest.param({"name": "mlx5_ib"}, {"lsmod": LSMOD, BOOT: failed("cat: /etc/modules: Input/output error")},
                 [("loaded", "ok", "loaded", "loaded"), ("persistent", "error", "listed", None)],
                 id="boot-list-fails"),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_kernel_module(spec: dict, outputs: dict, expected: list) -> None:
    assert run("kernel_module", spec, outputs).summary() == expected


def test_used_by_goes_into_the_message() -> None:
    result = run("kernel_module", {"name": "ib_core", "persistent": False}, {"lsmod": LSMOD})
    assert result.checks[0].message == "used by mlx5_ib, ib_uverbs, ib_umad, rdma_cm, rdma_ucm"


def test_parse_lsmod() -> None:
    modules = parse_lsmod(LSMOD)
    assert modules["rdma_cm"] == ["rdma_ucm"]
    assert modules["overlay"] == []
    assert len(modules) == 11


def test_comments_do_not_count() -> None:
    assert boot_listed({"/etc/modules-load.d/a.conf": "# mlx5_ib\n; mlx5_ib\n"}, "mlx5_ib") is None


def test_modules_share_the_lsmod_probe() -> None:
    one = run("kernel_module", {"name": "a"}, {"lsmod": LSMOD, BOOT: ""})
    two = run("kernel_module", {"name": "b"}, {"lsmod": LSMOD, BOOT: ""})
    assert [p.key for p in one.probes] == [p.key for p in two.probes]
    assert one.probes[0] == kernel_module.LSMOD
