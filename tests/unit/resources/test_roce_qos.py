"""roce_qos: mlnx_qos, the ECN and traffic-class files, cma_roce_tos and ibv_devinfo against the spec."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from provisioner.load.specs import RoceQosSpec
from provisioner.resources import roce_qos
from provisioner.resources.base import HostContext

from ._recorded import NOT_FOUND, failed, final_command, run, sample

QOS = "mlnx_qos -i"
ECN = "/enable"
CNP = "cnp_dscp"
TCLASS = "traffic_class"
TOS = "cma_roce_tos"
DEVINFO = "ibv_devinfo"
GIDS = "show_gids"


def ecn_files(np: list[int], rp: list[int], netdev: str = "eth1", root: str = "/sys") -> str:
    """What `grep -r -H .` prints for the ECN switches (directory order, so not sorted)."""
    lines = []
    for point, values in (("roce_rp", rp), ("roce_np", np)):
        for prio in (3, 5, 2, 6, 7, 0, 4, 1):
            lines.append(f"{root}/class/net/{netdev}/ecn/{point}/enable/{prio}:{values[prio]}")
    return "\n".join(lines) + "\n"


ECN_ON_3 = ecn_files([0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0])

# `ibv_devinfo -v -d mlx5_0` of a ConnectX-7 RoCE port (the device capability list left out).
DEVINFO_ROCE = (
    "hca_id:\tmlx5_0\n"
    "\ttransport:\t\t\tInfiniBand (0)\n"
    "\tfw_ver:\t\t\t\t28.39.2048\n"
    "\tnode_guid:\t\t\t58a2:e103:002a:09b8\n"
    "\tsys_image_guid:\t\t\t58a2:e103:002a:09b8\n"
    "\tvendor_id:\t\t\t0x02c9\n"
    "\tvendor_part_id:\t\t\t4129\n"
    "\thw_ver:\t\t\t\t0x0\n"
    "\tboard_id:\t\t\tMT_0000000838\n"
    "\tphys_port_cnt:\t\t\t1\n"
    "\t\tport:\t1\n"
    "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    "\t\t\tmax_mtu:\t\t4096 (5)\n"
    "\t\t\tactive_mtu:\t\t4096 (5)\n"
    "\t\t\tsm_lid:\t\t\t0\n"
    "\t\t\tport_lid:\t\t0\n"
    "\t\t\tport_lmc:\t\t0x00\n"
    "\t\t\tlink_layer:\t\tEthernet\n"
    "\t\t\tgid_tbl_len:\t\t255\n"
    "\t\t\tphys_state:\t\tLINK_UP (5)\n"
    "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:5aa2:e1ff:fe2a:09b8, RoCE v1\n"
    "\t\t\tGID[  1]:\t\tfe80::5aa2:e1ff:fe2a:9b8, RoCE v2\n"
    "\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c000:0202, RoCE v1\n"
    "\t\t\tGID[  3]:\t\t::ffff:192.0.2.2, RoCE v2\n"
    "\n"
)
# Older tools print the GIDs without their type.
DEVINFO_UNTYPED = DEVINFO_ROCE.replace(", RoCE v1", "").replace(", RoCE v2", "")
# `show_gids mlx5_0` of that port after another device's table, in show_gids' full form of the same GIDs
# (ibv_devinfo printed indexes 1 and 3 short).
GIDS_ROCE = (
    "DEV     PORT    INDEX   GID                                     IPv4            VER     DEV\n"
    "---     ----    -----   ---                                     ------------    ---     ---\n"
    "mlx5_1  1       3       0000:0000:0000:0000:0000:ffff:c000:0203 192.0.2.3       v1      eth2\n"
    "n_gids_found=1\n"
    "DEV     PORT    INDEX   GID                                     IPv4            VER     DEV\n"
    "---     ----    -----   ---                                     ------------    ---     ---\n"
    "mlx5_0  1       0       fe80:0000:0000:0000:5aa2:e1ff:fe2a:09b8                 v1      eth1\n"
    "mlx5_0  1       1       fe80:0000:0000:0000:5aa2:e1ff:fe2a:09b8                 v2      eth1\n"
    "mlx5_0  1       2       0000:0000:0000:0000:0000:ffff:c000:0202 192.0.2.2       v1      eth1\n"
    "mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:c000:0202 192.0.2.2       v2      eth1\n"
    "n_gids_found=4\n"
)

# mlnx_qos after `--tsa ets,... --tcbw 10,...,30`, in the layout the lab's mlnx_qos prints.
QOS_ETS = """\
DCBX mode: OS controlled
Priority trust state: dscp
dscp2prio mapping:
\tprio:0 dscp:07,06,05,04,03,02,01,00,
\tprio:1 dscp:15,14,13,12,11,10,09,08,
\tprio:2 dscp:23,22,21,20,19,18,17,16,
\tprio:3 dscp:31,30,29,28,27,26,25,24,
\tprio:4 dscp:39,38,37,36,35,34,33,32,
\tprio:5 dscp:47,46,45,44,43,42,41,40,
\tprio:6 dscp:55,54,53,52,51,50,49,48,
\tprio:7 dscp:63,62,61,60,59,58,57,56,
Receive buffer size (bytes): 524160,0,0,0,0,0,0,0,
Cable len: 7
PFC configuration:
\tpriority    0   1   2   3   4   5   6   7
\tenabled     0   0   0   1   0   0   0   0  \x20
\tbuffer      0   0   0   0   0   0   0   0  \x20
tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  1
tc: 1 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  0
tc: 2 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  2
tc: 3 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  3
tc: 4 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  4
tc: 5 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  5
tc: 6 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  6
tc: 7 ratelimit: unlimited, tsa: ets, bw: 30%
\t priority:  7
"""

FULL = {
    "interface": "eth1", "trust": "dscp", "pfc": [3], "dscp2prio": {26: 3, 48: 6}, "ecn": [3], "cnp_dscp": 48,
    "traffic_class": 106, "roce_tos": 106, "port_state": "active", "active_mtu": 4096, "gid_index": 3,
}
FULL_OUTPUTS = {
    QOS: sample("mlnx_qos-1.txt"), ECN: ECN_ON_3, CNP: "48\n", TCLASS: sample("traffic_class-1.txt"),
    TOS: "106\n", DEVINFO: DEVINFO_ROCE, GIDS: sample("show_gids-3.txt"),
}

CASES = [
    pytest.param(FULL, FULL_OUTPUTS, [
        ("trust", "ok", "dscp", "dscp"), ("pfc", "ok", "3", "3"), ("dscp2prio[26]", "ok", "3", "3"),
        ("dscp2prio[48]", "ok", "6", "6"), ("ecn", "ok", "3", "3"), ("cnp_dscp", "ok", "48", "48"),
        ("traffic_class", "ok", "106", "106"), ("roce_tos", "ok", "106", "106"),
        ("port_state", "ok", "active", "active"), ("active_mtu", "ok", "4096", "4096"),
        ("gid_index", "ok", "index 3: RoCE v2", "index 3: RoCE v2"),
    ], id="in-sync"),
    pytest.param({"interface": "eth1", "trust": "dscp", "pfc": [3], "dscp2prio": {26: 3}},
                 {QOS: sample("mlnx_qos-2.txt")},
                 [("trust", "drift", "dscp", "pcp"), ("pfc", "drift", "3", "none"),
                  ("dscp2prio[26]", "drift", "3", "none")], id="factory-defaults"),
    pytest.param({"interface": "eth1", "trust": "dscp", "pfc": [3], "dscp2prio": {26: 3}},
                 {QOS: sample("mlnx_qos-3.txt")},
                 [("trust", "ok", "dscp", "dscp"), ("pfc", "drift", "3", "none"), ("dscp2prio[26]", "ok", "3", "3")],
                 id="trust-set-pfc-not"),
    pytest.param({"interface": "eth1", "dscp2prio": {26: 5}}, {QOS: sample("mlnx_qos-1.txt")},
                 [("dscp2prio[26]", "drift", "5", "3")], id="dscp-mapped-elsewhere"),
    pytest.param({"interface": "eth1", "pfc": [3, 4]}, {QOS: sample("mlnx_qos-1.txt")},
                 [("pfc", "drift", "3,4", "3")], id="pfc-missing-one"),
    pytest.param({"interface": "eth1", "ecn": [3]},
                 {ECN: ecn_files([0, 0, 0, 1, 0, 0, 0, 0], [0] * 8)},
                 [("ecn", "drift", "3", "none; half on: 3 (roce_np only)")], id="ecn-half-on"),
    pytest.param({"interface": "eth1", "ecn": [3]},
                 {ECN: ecn_files([0, 0, 0, 1, 0, 1, 0, 0], [0, 0, 0, 1, 0, 1, 0, 0])},
                 [("ecn", "drift", "3", "3,5")], id="ecn-extra-priority"),
    pytest.param({"interface": "eth1", "ecn": []}, {ECN: ecn_files([0] * 8, [0] * 8)},
                 [("ecn", "ok", "none", "none")], id="ecn-all-off-wanted"),
    pytest.param({"interface": "eth1", "cnp_dscp": 48}, {CNP: "46\n"}, [("cnp_dscp", "drift", "48", "46")],
                 id="cnp-dscp"),
    pytest.param({"rdma_device": "mlx5_0", "traffic_class": 106}, {TCLASS: ""},
                 [("traffic_class", "drift", "106", "unset")], id="traffic-class-unset"),
    # A read cut inside its only line is not "unset": the check cannot say.
    pytest.param({"rdma_device": "mlx5_0", "traffic_class": 106}, {TCLASS: "Global tcl"},
                 [("traffic_class", "error", "106", None)], id="traffic-class-cut-short"),
    pytest.param({"rdma_device": "mlx5_0", "roce_tos": 106}, {TOS: "0\n"}, [("roce_tos", "drift", "106", "0")],
                 id="roce-tos"),
    pytest.param({"rdma_device": "mlx4_1", "port_state": "active", "active_mtu": 4096, "gid_index": 0},
                 {DEVINFO: sample("ibv_devinfo-v-1.txt"), GIDS: NOT_FOUND},
                 [("port_state", "drift", "active", "down"), ("active_mtu", "ok", "4096", "4096"),
                  ("gid_index", "drift", "index 0: RoCE v2", "index 0: IB")], id="infiniband-port-down"),
    pytest.param({"rdma_device": "mlx5_0", "gid_index": 9}, {DEVINFO: DEVINFO_ROCE, GIDS: sample("show_gids-3.txt")},
                 [("gid_index", "drift", "index 9: RoCE v2", "no index 9")], id="no-such-gid"),
    pytest.param({"rdma_device": "mlx5_0", "gid_index": 2}, {DEVINFO: DEVINFO_ROCE, GIDS: sample("show_gids-3.txt")},
                 [("gid_index", "drift", "index 2: RoCE v2", "index 2: RoCE v1")], id="gid-is-v1"),
    pytest.param({"rdma_device": "mlx5_0", "gid_index": 3},
                 {DEVINFO: DEVINFO_UNTYPED, GIDS: GIDS_ROCE},
                 [("gid_index", "ok", "index 3: RoCE v2", "index 3: RoCE v2")], id="gid-type-from-show-gids"),
    # show_gids' index 3 holds another GID than ibv_devinfo's (another host's table, or the table changed
    # between the two reads): its type says nothing about this GID.
    pytest.param({"rdma_device": "mlx5_0", "gid_index": 3},
                 {DEVINFO: DEVINFO_UNTYPED, GIDS: sample("show_gids-3.txt")},
                 [("gid_index", "error", "index 3: RoCE v2", None)], id="gid-type-from-another-gid"),
    pytest.param({"rdma_device": "mlx5_0", "gid_index": 2},
                 {DEVINFO: DEVINFO_UNTYPED, GIDS: GIDS_ROCE},
                 [("gid_index", "drift", "index 2: RoCE v2", "index 2: RoCE v1")], id="gid-v1-from-show-gids"),
    pytest.param({"rdma_device": "mlx5_0", "gid_index": 3}, {DEVINFO: DEVINFO_UNTYPED, GIDS: NOT_FOUND},
                 [("gid_index", "error", "index 3: RoCE v2", None)], id="gid-type-unknown"),
    pytest.param({"interface": "eth1", "tsa": ["ets"] * 8, "tcbw": [10] * 7 + [30]}, {QOS: QOS_ETS},
                 [("tsa", "ok", "ets,ets,ets,ets,ets,ets,ets,ets", "ets,ets,ets,ets,ets,ets,ets,ets"),
                  ("tcbw", "ok", "10,10,10,10,10,10,10,30", "10,10,10,10,10,10,10,30")], id="ets-in-sync"),
    pytest.param({"interface": "eth1", "tsa": ["ets"] * 8, "tcbw": [10] * 7 + [30]}, {QOS: sample("mlnx_qos-1.txt")},
                 [("tsa", "drift", "ets,ets,ets,ets,ets,ets,ets,ets",
                   "vendor,vendor,vendor,vendor,vendor,vendor,vendor,vendor"),
                  ("tcbw", "drift", "10,10,10,10,10,10,10,30", "0,0,0,0,0,0,0,0")], id="ets-not-set"),
    pytest.param({"interface": "eth1", "trust": "dscp", "pfc": [3], "ecn": [3]},
                 {QOS: failed("Netlink error: Operation not supported: eth1"), ECN: ECN_ON_3},
                 [("trust", "error", "dscp", None), ("pfc", "error", "3", None), ("ecn", "ok", "3", "3")],
                 id="mlnx-qos-fails-only-its-attributes"),
    pytest.param({"interface": "eth1", "ecn": [3], "cnp_dscp": 48},
                 {ECN: failed("grep: /sys/class/net/eth1/ecn/roce_np/enable: No such file or directory", 2),
                  CNP: failed("cat: /sys/class/net/eth1/ecn/roce_np/cnp_dscp: No such file or directory")},
                 [("ecn", "error", "3", None), ("cnp_dscp", "error", "48", None)], id="no-ecn-files"),
    pytest.param({"interface": "eth1", "ecn": [3]}, {ECN: "/sys/class/net/eth1/ecn/roce_np/enable/3:1\n"},
                 [("ecn", "error", "3", None)], id="ecn-values-missing"),
    pytest.param({"rdma_device": "mlx5_0", "roce_tos": 106}, {TOS: NOT_FOUND}, [("roce_tos", "error", "106", None)],
                 id="no-cma-roce-tos"),
    pytest.param({"interface": "eth1", "port_state": "active"}, {DEVINFO: "garbage before any hca_id\n"},
                 [("port_state", "error", "active", None)], id="devinfo-unparseable"),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_roce_qos(spec: dict, outputs: dict, expected: list) -> None:
    assert run("roce_qos", spec, outputs).summary() == expected


def test_failure_messages() -> None:
    result = run("roce_qos", {"rdma_device": "mlx5_9", "trust": "dscp"},
                 {QOS: failed("no netdev found for RDMA device mlx5_9")})
    assert result.checks[0].message == "mlnx_qos: exit code 1: no netdev found for RDMA device mlx5_9"
    result = run("roce_qos", {"interface": "eth1", "ecn": [3]}, {ECN: "/sys/class/net/eth1/ecn/roce_np/enable/3:1\n"})
    assert result.checks[0].message.startswith("cannot parse ecn output: no roce_np value for priorities 0,1,2,4")


def test_half_on_message() -> None:
    result = run("roce_qos", {"interface": "eth1", "ecn": [3]}, {ECN: ecn_files([0] * 8, [0, 0, 0, 1, 0, 0, 0, 0])})
    assert result.checks[0].actual == "none; half on: 3 (roce_rp only)"
    assert "both roce_np and roce_rp" in result.checks[0].message


def test_pcp_trust_explains_missing_mapping() -> None:
    result = run("roce_qos", {"interface": "eth1", "dscp2prio": {26: 3}}, {QOS: sample("mlnx_qos-2.txt")})
    assert result.checks[0].message == "no mapping for this DSCP (trust pcp)"


# ---------------------------------------------------------------------------------------------- probes

HOST = HostContext("h")


def _probes(ctx: HostContext = HOST, **spec: object) -> list[str]:
    return [p.command for p in roce_qos.probes(RoceQosSpec.model_validate(spec), ctx)]


def test_only_what_the_spec_sets_is_probed() -> None:
    (tclass,) = _probes(rdma_device="mlx5_0", traffic_class=106)
    assert shlex.split(tclass)[-3:] == ["cat", "--", "/sys/class/infiniband/mlx5_0/tc/1/traffic_class"]
    (qos,) = _probes(interface="eth1", trust="dscp", pfc=[3])
    assert "\npfc show dev eth1 prio-pfc\n" in qos and qos.endswith("else mlnx_qos -i eth1; fi")
    assert _probes(rdma_device="mlx5_0", port_state="active", active_mtu=4096) == ["ibv_devinfo -v -d mlx5_0"]


def test_sysfs_root_comes_from_the_host_and_is_quoted() -> None:
    root = "/var/lib/fab net's/sys"
    (command,) = _probes(HostContext("h", root), interface="eth1", ecn=[3])
    np, rp = (f"{root}/class/net/eth1/ecn/{point}/enable" for point in ("roce_np", "roce_rp"))
    words = shlex.split(command)
    assert words[:9] == ["if", "[", "-d", np, "]", "&&", "[", "-d", rp]
    assert words[-8:-1] == ["grep", "-r", "-H", ".", "--", np, rp + ";"]
    (command,) = _probes(HostContext("h", root), rdma_device="mlx5_0", cnp_dscp=48)
    assert shlex.split(final_command(roce_qos.Probe(command)))[-3:] == [
        "cat", "--", f"{root}/class/net/$netdev/ecn/roce_np/cnp_dscp",
    ]


def test_hostile_interface_name_stays_one_word() -> None:
    name = "e'th;$(x)"
    with pytest.raises(ValidationError, match="shell character"):
        RoceQosSpec(interface=name, trust="dscp")  # refused at validate time; quoting is the second defence
    spec = RoceQosSpec.model_construct(interface=name, trust="dscp")
    words = shlex.split(roce_qos.probes(spec, HOST)[0].command)
    assert words.count(name) == 3 and f"/sys/class/net/{name}/qos/trust" in words  # dcb's three lines
    assert words[-4:] == ["mlnx_qos", "-i", name + ";", "fi"]  # shlex does not split off the `;`


def test_probes_of_two_resources_on_one_port_are_shared() -> None:
    one = _probes(interface="eth1", trust="dscp")
    two = _probes(interface="eth1", pfc=[3], dscp2prio={26: 3})
    assert one == two


# --------------------------------------------------------------- the lookups, run in a real POSIX shell

def _tool(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH holding only awk and the fake tools a test writes."""
    awk = shutil.which("awk")
    if awk is None:
        pytest.skip("no awk")
    os.symlink(awk, tmp_path / "awk")
    # Every fake tool prints its arguments, one per line, so the test sees exactly what it received.
    for name in ("mlnx_qos", "cma_roce_tos"):
        _tool(tmp_path, name, f"echo {name}; for a in \"$@\"; do printf '%s\\n' \"$a\"; done\n")
    return tmp_path


def _shell(command: str, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False,
                          env={"PATH": str(bin_dir)})


RDMA_LINKS = "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev eth1\n" \
             "link mlx5_1/1 state DOWN physical_state DISABLED netdev e'th;$(x)\n"


def test_netdev_found_with_rdma_link(bin_dir: Path) -> None:
    _tool(bin_dir, "rdma", f"[ \"$3\" = mlx5_1/1 ] && printf '%s' {shlex.quote(RDMA_LINKS.splitlines()[1])}\n")
    (command,) = _probes(rdma_device="mlx5_1", trust="dscp")
    done = _shell(command, bin_dir)
    assert (done.returncode, done.stdout) == (0, "mlnx_qos\n-i\ne'th;$(x)\n")


def test_netdev_found_with_ibdev2netdev_when_rdma_has_none(bin_dir: Path) -> None:
    _tool(bin_dir, "rdma", "exit 0\n")
    _tool(bin_dir, "ibdev2netdev",
          "echo 'mlx5_0 port 1 ==> ens1f0np0 (Up)'; echo 'mlx5_1 port 1 ==> ens1f1np1 (Down)'\n")
    (command,) = _probes(rdma_device="mlx5_1", trust="dscp")
    assert _shell(command, bin_dir).stdout == "mlnx_qos\n-i\nens1f1np1\n"


def test_netdev_not_found_fails_with_a_reason(bin_dir: Path) -> None:
    (command,) = _probes(rdma_device="mlx5_7", trust="dscp")  # neither rdma nor ibdev2netdev installed
    done = _shell(command, bin_dir)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (1, "", "no netdev found for RDMA device mlx5_7")


def test_device_found_for_an_interface(bin_dir: Path) -> None:
    _tool(bin_dir, "rdma", f"printf '%s' {shlex.quote(RDMA_LINKS)}\n")
    (probe,) = roce_qos.probes(RoceQosSpec.model_construct(interface="e'th;$(x)", roce_tos=106), HOST)
    command = probe.command
    assert _shell(command, bin_dir).stdout == "cma_roce_tos\n-d\nmlx5_1\n"


def test_device_found_with_ibdev2netdev_fallback(bin_dir: Path) -> None:
    _tool(bin_dir, "ibdev2netdev", "echo 'mlx5_0 port 1 ==> ens1f0np0 (Up)'; echo 'mlx5_3 port 1 ==> eth1 (Up)'\n")
    (command,) = _probes(interface="eth1", roce_tos=106)
    assert _shell(command, bin_dir).stdout == "cma_roce_tos\n-d\nmlx5_3\n"


def test_device_found_in_sysfs_without_starting_a_tool(bin_dir: Path, tmp_path: Path) -> None:
    # The PCI function behind the netdev lists its RDMA device; no rdma or ibdev2netdev is installed.
    root = tmp_path / "sys root's"
    (root / "class/net/e'th;$(x)/device/infiniband/mlx5_4").mkdir(parents=True)
    (root / "class/infiniband/mlx5_4/device/net/ens1f0np0").mkdir(parents=True)
    (probe,) = roce_qos.probes(RoceQosSpec.model_construct(interface="e'th;$(x)", roce_tos=106),
                               HostContext("h", str(root)))
    assert _shell(probe.command, bin_dir).stdout == "cma_roce_tos\n-d\nmlx5_4\n"
    (command,) = _probes(HostContext("h", str(root)), rdma_device="mlx5_4", trust="dscp")
    assert _shell(command, bin_dir).stdout == "mlnx_qos\n-i\nens1f0np0\n"


def test_a_netdev_sysfs_ties_to_several_devices_or_none_is_looked_up_with_tools(bin_dir: Path, tmp_path: Path) -> None:
    for device in ("mlx5_0", "mlx5_1"):
        (tmp_path / "class/net/eth1/device/infiniband" / device).mkdir(parents=True)
    (tmp_path / "class/net/eth2/device/infiniband").mkdir(parents=True)  # none: a bond, say
    _tool(bin_dir, "rdma", "echo 'link mlx5_1/1 state ACTIVE physical_state LINK_UP netdev eth1'; "
                           "echo 'link mlx5_bond_0/1 state ACTIVE physical_state LINK_UP netdev eth2'\n")
    ctx = HostContext("h", str(tmp_path))
    (command,) = _probes(ctx, interface="eth1", roce_tos=106)
    assert _shell(command, bin_dir).stdout == "cma_roce_tos\n-d\nmlx5_1\n"
    (command,) = _probes(ctx, interface="eth2", roce_tos=106)
    assert _shell(command, bin_dir).stdout == "cma_roce_tos\n-d\nmlx5_bond_0\n"


def test_mlnx_qos_cut_before_the_pfc_enabled_row_is_an_error_not_ok() -> None:
    lines = sample("mlnx_qos-1.txt").splitlines(keepends=True)
    cut = "".join(lines[:14])  # trust is printed, the PFC block stops before its `enabled` row
    result = run("roce_qos", {"rdma_device": "mlx5_0", "trust": "dscp", "pfc": [3]}, {QOS: cut})
    assert [(c.attribute, c.status) for c in result.checks] == [("trust", "error"), ("pfc", "error")]
    assert "incomplete; missing the PFC 'enabled' row" in result.checks[0].message


@pytest.mark.parametrize(("spec", "program"), [({"active_mtu": 4096}, "ibv_devinfo"),
                                                ({"gid_index": 3}, "show_gids")])
def test_the_rdma_tool_after_a_device_lookup_replaces_the_probes_shell(bin_dir: Path, spec: dict[str, object],
                                                                     program: str) -> None:
    # After the lookup the probe's shell execs the tool (no fork): its pid is the shell's, its status the probe's.
    _tool(bin_dir, "rdma", "echo 'link mlx5_3/1 state ACTIVE physical_state LINK_UP netdev eth1'\n")
    _tool(bin_dir, program, 'echo "pid $$"; for a in "$@"; do printf "%s\\n" "$a"; done; exit 3\n')
    [probe] = [p for p in roce_qos.probes(RoceQosSpec.model_validate({"interface": "eth1", **spec}), HOST)
               if f"exec {program} " in p.command]
    shell = subprocess.Popen(["/bin/sh", "-c", probe.command], stdout=subprocess.PIPE, text=True,
                             env={"PATH": str(bin_dir)})
    out, _ = shell.communicate(timeout=30)
    assert shell.returncode == 3 and out.splitlines()[0] == f"pid {shell.pid}" and out.splitlines()[-1] == "mlx5_3"
    (bin_dir / program).unlink()
    assert _shell(probe.command, bin_dir).returncode == 127  # not installed: "command not found", as before
