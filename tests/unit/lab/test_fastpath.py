"""The compiled fast path of the emulated tools (`labhw-run.c`): the same bytes as the Python emulation,
answers read-only calls without starting Python, and never answers from output kept for other inputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.lab import emulation
from tests.unit.lab.test_labhw import Node
from tests.unit.lab.test_labhw import node as node  # the fixture, used by name
from tests.unit.lab.test_labhw_dcb import PFC_OFF

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (scripts/bootstrap.sh)")

CALLS = [
    ("ofed_info", "-s"), ("ofed_info",), ("ibv_devinfo",), ("ibv_devinfo", "-v"), ("ibv_devinfo", "-d", "mlx5_0"),
    ("ibstat",), ("ibstatus",), ("ibdev2netdev",), ("ibdev2netdev", "-v"), ("show_gids",), ("show_gids", "mlx5_0", "1"),
    ("rdma", "link", "show"), ("rdma", "-j", "link"), ("rdma", "dev"), ("nvidia-smi", "topo", "-m"),
    ("nvidia-smi", "-L"), ("cma_roce_tos", "-d", "mlx5_0"), ("lsmod",), ("dcb", "pfc", "show", "dev", "eth1"),
    ("dcb", "ets", "show", "dev", "eth1", "tc-tsa", "tc-bw", "prio-tc"), ("dcb", "-N", "app", "show", "dev", "eth1"),
]


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = emulation.fast_path_binary(tmp_path_factory.mktemp("cc"))
    assert binary is not None
    return binary


def fast(node: Node, runner: Path, *argv: str, python: str = sys.executable,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FABNET_LAB_HW_ROOT": str(node.root), "FABNET_LAB_NET_SYSFS": str(node.net),
           "PATH": f"{node.bin}{os.pathsep}{os.environ.get('PATH', '')}", "FABNET_LAB_PYTHON": python,
           "FABNET_LAB_PACKAGE": str(emulation.LABHW_SOURCE)}
    # The key holds every interface address of the network namespace it runs in: in the host's, labs that
    # other tests build and remove meanwhile would change it between two calls. A namespace of its own
    # (root only) keeps the key this test's.
    isolate = ["unshare", "--net"] if os.geteuid() == 0 and shutil.which("unshare") else []
    return subprocess.run([*isolate, str(runner), "--as", *argv], capture_output=True, text=True, env=env,
                          timeout=30, check=False, input=stdin if stdin is not None else "")


def kept(node: Node) -> list[Path]:
    cache = node.root / "cache"
    return sorted(cache.iterdir()) if cache.is_dir() else []


@pytest.mark.parametrize("call", CALLS, ids=" ".join)
def test_same_bytes_as_python_and_the_second_call_needs_no_python(node: Node, runner: Path,
                                                                 call: tuple[str, ...]) -> None:
    node.addresses("eth1", "10.0.0.5")
    expected = node.out(*call)
    first = fast(node, runner, *call)
    assert (first.returncode, first.stdout, first.stderr) == (0, expected, "")
    assert len(kept(node)) == 1
    # /bin/false as Python: only kept output can answer now.
    second = fast(node, runner, *call, python="/bin/false")
    assert (second.returncode, second.stdout) == (0, expected)


def test_mtu_and_link_changes_are_seen_at_once(node: Node, runner: Path) -> None:
    node.netdev("eth1", mtu=9000)
    assert "active_mtu:\t\t4096 (5)" in fast(node, runner, "ibv_devinfo").stdout
    node.netdev("eth1", mtu=1500)
    assert "active_mtu:\t\t1024 (3)" in fast(node, runner, "ibv_devinfo").stdout
    node.netdev("eth1", mtu=1500, operstate="down", carrier=0)
    assert fast(node, runner, "ibdev2netdev").stdout == "mlx5_0 port 1 ==> eth1 (Down)\n"


def test_setters_run_python_and_their_writes_are_seen(node: Node, runner: Path) -> None:
    assert fast(node, runner, "cma_roce_tos").stdout == "0\n"
    assert fast(node, runner, "cma_roce_tos", "-t", "106").returncode == 0
    assert fast(node, runner, "cma_roce_tos").stdout == "106\n"
    assert "nvidia_peermem" not in fast(node, runner, "lsmod").stdout
    assert fast(node, runner, "modprobe", "nvidia_peermem").returncode == 0
    assert "nvidia_peermem" in fast(node, runner, "lsmod").stdout
    assert fast(node, runner, "modprobe", "-r", "mlx5_ib").returncode == 0
    gone = fast(node, runner, "ibv_devinfo")
    assert (gone.returncode, gone.stderr.strip()) == (255, "No IB devices found")


def test_mlnx_qos_stays_python_and_errors_are_never_kept(node: Node, runner: Path) -> None:
    assert fast(node, runner, "mlnx_qos", "-i", "eth1").returncode == 0
    assert fast(node, runner, "mlnx_qos", "-i", "eth1", python="/bin/false").returncode != 0
    missing = fast(node, runner, "ibv_devinfo", "-d", "mlx5_9")
    assert missing.returncode == 255 and "wasn't found" in missing.stderr
    assert kept(node) == []
    assert fast(node, runner, "nvidia-smi").stdout.count("NVIDIA-SMI") == 1
    assert kept(node) == []  # the default table carries the time of day


def test_init_drops_kept_output(node: Node, runner: Path) -> None:
    fast(node, runner, "ofed_info", "-s")
    assert kept(node)
    node.out("fabnet-lab-init")
    assert kept(node) == []


def test_each_tool_is_its_own_wrapper_file(node: Node, runner: Path, tmp_path: Path) -> None:
    wrapper = tmp_path / "ibdev2netdev"
    wrapper.write_text(emulation.fast_wrapper_script("ibdev2netdev", runner=str(runner)))
    wrapper.chmod(0o755)
    env = {**os.environ, "FABNET_LAB_HW_ROOT": str(node.root), "FABNET_LAB_NET_SYSFS": str(node.net),
           "FABNET_LAB_PYTHON": sys.executable, "FABNET_LAB_PACKAGE": str(emulation.LABHW_SOURCE)}
    proc = subprocess.run([str(wrapper)], capture_output=True, text=True, env=env, check=True)
    assert proc.stdout == "mlx5_0 port 1 ==> eth1 (Up)\n"
    with pytest.raises(emulation.LabError):
        emulation.fast_wrapper_script("rm -rf /")


def test_dcb_sees_an_mlnx_qos_setter_at_once(node: Node, runner: Path) -> None:
    read = ("dcb", "-N", "app", "show", "dev", "eth1", "dscp-prio")
    assert fast(node, runner, *read).stdout == ""  # trust pcp: no DSCP entries
    assert fast(node, runner, "dcb", "pfc", "show", "dev", "eth1", "prio-pfc").stdout.startswith("prio-pfc 0:off")
    assert fast(node, runner, "mlnx_qos", "-i", "eth1", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0").returncode == 0
    assert fast(node, runner, *read, python="/bin/false").returncode != 0  # the state changed: nothing kept fits
    assert fast(node, runner, *read).stdout.startswith("dscp-prio 0:0 1:0 ")
    pfc = fast(node, runner, "dcb", "pfc", "show", "dev", "eth1", "prio-pfc").stdout
    assert pfc == "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"


def test_dcb_names_and_batches_are_never_kept(node: Node, runner: Path) -> None:
    # DSCP names come from the node's rt_dsfield file and a batch file's commands from that file: neither is in
    # the key.
    assert fast(node, runner, "mlnx_qos", "-i", "eth1", "--trust", "dscp").returncode == 0
    before = kept(node)
    assert fast(node, runner, "dcb", "app", "show", "dev", "eth1").returncode == 0
    assert fast(node, runner, "dcb", "-N", "-b", os.devnull).returncode == 0
    assert kept(node) == before


QOS_BATCH = "app show dev eth1 dscp-prio\npfc show dev eth1 prio-pfc\nets show dev eth1 tc-tsa tc-bw prio-tc\n"


@pytest.mark.parametrize("spelling", [("-N", "-b", "-"), ("-Nb", "-"), ("-N", "--batch", "-"), ("--Numeric", "-b-")])
def test_a_batch_on_stdin_is_kept_under_its_commands(node: Node, runner: Path, spelling: tuple[str, ...]) -> None:
    # fabnet's QoS probe: one `dcb -N -b -` whose commands come on standard input. The fast path reads them
    # into the key, so the same batch needs no Python the second time and another batch never gets its answer.
    assert fast(node, runner, "mlnx_qos", "-i", "eth1", "--trust", "dscp").returncode == 0
    alone = "".join(fast(node, runner, "dcb", *(["-N"] if line.startswith("app") else []), *line.split()).stdout
                    for line in QOS_BATCH.splitlines())
    first = fast(node, runner, "dcb", *spelling, stdin=QOS_BATCH)
    assert (first.returncode, first.stdout, first.stderr) == (0, alone, "")
    again = fast(node, runner, "dcb", *spelling, stdin=QOS_BATCH, python="/bin/false")
    assert (again.returncode, again.stdout) == (0, alone)
    other = fast(node, runner, "dcb", *spelling, stdin="pfc show dev eth1 prio-pfc\n", python="/bin/false")
    assert other.returncode != 0  # not answered from the kept batch
    assert fast(node, runner, "dcb", *spelling, stdin="pfc show dev eth1 prio-pfc\n").stdout == PFC_OFF


def test_a_batch_on_stdin_with_names_or_a_failure_is_not_kept(node: Node, runner: Path) -> None:
    before = kept(node)
    named = fast(node, runner, "dcb", "-b", "-", stdin="app show dev eth1\n")  # names: from rt_dsfield
    failed = fast(node, runner, "dcb", "-N", "-b", "-", stdin="pfc show dev eth1 prio-pfc\npfc show dev eth9\n")
    assert named.returncode == 0 and failed.returncode == 1 and failed.stdout == PFC_OFF
    assert kept(node) == before
