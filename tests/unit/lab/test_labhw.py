"""The lab's emulated NIC/RDMA/GPU tools: real tools' formats, persistent state, real failures.

Each test runs the node-side script as a subprocess against a temporary state root and a fake
`/sys/class/net`, and checks concrete output, often line for line against a real sample.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import LabError
from provisioner.lab import emulation

LABHW = emulation.LABHW_SOURCE
MAC = "58:a2:e1:2a:09:b8"


@dataclass
class Node:
    """One emulated node: its state root, its netdevs and a fake `ip` that reports their addresses."""

    root: Path
    net: Path
    bin: Path

    def netdev(self, name: str, *, mtu: int = 1500, operstate: str = "up", mac: str = MAC, carrier: int = 1,
               ifindex: int = 3) -> None:
        base = self.net / name
        base.mkdir(parents=True, exist_ok=True)
        for key, value in (("mtu", mtu), ("operstate", operstate), ("address", mac), ("carrier", carrier),
                           ("ifindex", ifindex)):
            (base / key).write_text(f"{value}\n")

    def hw(self, data: dict[str, Any]) -> None:
        (self.root / "hw.json").write_text(json.dumps(data))

    def addresses(self, netdev: str, *ipv4: str) -> None:
        info = [{"family": "inet", "local": ip, "prefixlen": 24, "scope": "global"} for ip in ipv4]
        info.append({"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"})
        (self.bin / f"addr-{netdev}.json").write_text(json.dumps([{"ifname": netdev, "addr_info": info}]))

    def run(self, command: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "FABNET_LAB_HW_ROOT": str(self.root), "FABNET_LAB_NET_SYSFS": str(self.net),
               "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        # -S: without site-packages, every run also proves the script needs only the standard library.
        proc = subprocess.run([sys.executable, "-S", str(LABHW), "--as", command, *args], capture_output=True,
                              text=True, env=env, timeout=30, check=False)
        if ok:
            assert proc.returncode == 0, f"{command} {args}: rc={proc.returncode} {proc.stderr}"
        return proc

    def out(self, command: str, *args: str) -> str:
        return self.run(command, *args).stdout


@pytest.fixture
def node(tmp_path: Path) -> Node:
    n = Node(tmp_path / "root", tmp_path / "net", tmp_path / "bin")
    n.root.mkdir()
    n.bin.mkdir()
    # `ip -j addr show dev IF`: $5 is IF; a netdev without a prepared answer makes `ip` fail.
    fake_ip = n.bin / "ip"
    fake_ip.write_text('#!/bin/sh\nf="$(dirname "$0")/addr-$5.json"\n[ -f "$f" ] || exit 1\ncat "$f"\n')
    fake_ip.chmod(0o755)
    n.netdev("eth0", ifindex=2, mac="02:00:00:00:00:01")
    n.netdev("eth1")
    n.hw({})
    return n


def sample(samples_dir: Path, name: str) -> list[str]:
    path = samples_dir / name
    if not path.exists():
        pytest.skip(f"sample {name} is not in tests/samples")
    return path.read_text().replace("\r\n", "\n").splitlines()


def shown(text: str) -> list[str]:
    """Output as a terminal shows it: tabs expanded, which is how the samples were recorded."""
    return text.expandtabs(8).splitlines()


# --- mlnx_qos ----------------------------------------------------------------------------------------


def test_mlnx_qos_default_is_sample_2_line_for_line(node: Node, samples_dir: Path) -> None:
    out = node.out("mlnx_qos", "-i", "eth1")
    assert "\r" not in out
    assert "\tpriority    0   1   2   3   4   5   6   7\n" in out
    assert shown(out) == sample(samples_dir, "mlnx_qos-2.txt")
    assert not (node.root / "qos").exists() or not list((node.root / "qos").iterdir())


def test_trust_dscp_adds_the_dscp2prio_block_of_sample_3_and_persists(node: Node, samples_dir: Path) -> None:
    expected = sample(samples_dir, "mlnx_qos-3.txt")
    assert shown(node.out("mlnx_qos", "-i", "eth1", "--trust", "dscp")) == expected
    assert shown(node.out("mlnx_qos", "-i", "eth1")) == expected
    assert json.loads((node.root / "qos/eth1.json").read_text())["trust"] == "dscp"


def test_pfc_setter_prints_the_result_and_a_later_call_still_sees_it(node: Node) -> None:
    first = node.out("mlnx_qos", "-i", "eth1", "--pfc", "0,0,0,1,0,0,0,0")
    later = node.out("mlnx_qos", "-i", "eth1")
    assert first == later
    assert "\tenabled     0   0   0   1   0   0   0   0   \n" in later
    assert "Priority trust state: pcp\n" in later
    assert json.loads((node.root / "hw.json").read_text()) == {}, "the profile itself is never rewritten"


def test_starting_qos_comes_from_hw_json_until_the_first_setter(node: Node) -> None:
    node.hw({"qos": {"eth1": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0], "dscp2prio": {"26": 5}}}})
    out = node.out("mlnx_qos", "-i", "eth1")
    assert "Priority trust state: dscp\n" in out
    assert "\tenabled     0   0   0   1   0   0   0   0   \n" in out
    assert "\tprio:5 dscp:47,46,45,44,43,42,41,40,26,\n" in out
    assert "\tprio:3 dscp:31,30,29,28,27,25,24,\n" in out
    out = node.out("mlnx_qos", "-i", "eth1", "--trust", "pcp")
    assert "dscp2prio" not in out
    assert "\tenabled     0   0   0   1   0   0   0   0   \n" in out


def test_ets_bandwidths_and_priority_to_tc_map(node: Node) -> None:
    out = node.out("mlnx_qos", "-i", "eth1", "-s", "ets,ets,ets,ets,ets,ets,ets,ets",
                   "-t", "10,10,10,40,10,10,5,5", "-p", "0,0,0,3,0,0,0,0")
    assert "tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%\n" + "".join(
        f"\t priority:  {p}\n" for p in (0, 1, 2, 4, 5, 6, 7)) + "tc: 1 " in out
    assert "tc: 3 ratelimit: unlimited, tsa: ets, bw: 40%\n\t priority:  3\n" in out
    # A strict tc takes no share: only the ets ones must add up to 100%.
    assert node.run("mlnx_qos", "-i", "eth1", "--tsa", "strict,ets,ets,ets,ets,ets,ets,ets", ok=False).returncode
    out = node.out("mlnx_qos", "-i", "eth1", "--tsa", "strict,ets,ets,ets,ets,ets,ets,ets",
                   "--tcbw", "0,10,10,50,10,10,5,5")
    assert "tc: 0 ratelimit: unlimited, tsa: strict\n" in out
    assert "tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%\n" in out


def test_dscp2prio_set_and_del(node: Node) -> None:
    out = node.out("mlnx_qos", "-i", "eth1", "--trust", "dscp", "--dscp2prio", "set,48,3")
    assert "\tprio:3 dscp:48,31,30,29,28,27,26,25,24,\n" in out
    assert "\tprio:6 dscp:55,54,53,52,51,50,49,\n" in out
    bad = node.run("mlnx_qos", "-i", "eth1", "--dscp2prio", "del,48,6", ok=False)
    assert bad.returncode != 0 and "48" in bad.stderr
    out = node.out("mlnx_qos", "-i", "eth1", "--dscp2prio", "del,48,3")
    assert "\tprio:0 dscp:48,07,06,05,04,03,02,01,00,\n" in out


@pytest.mark.parametrize("args", [
    ["--pfc", "0,0,1"], ["--pfc", "0,0,0,2,0,0,0,0"], ["--trust", "vlan"], ["-p", "0,1,2,3,4,5,6,8"],
    ["-s", "ets,ets,ets,ets,ets,ets,ets,ets"],  # ETS with the default 100% per tc does not add up
    ["-s", "ets,ets,ets,ets,ets,ets,ets,fair"], ["-t", "10,10,10,10,10,10,10,x"],
    ["--dscp2prio", "set,64,3"], ["--dscp2prio", "move,1,2"], ["--cable_len", "-1"],
])
def test_bad_values_fail_and_change_nothing(node: Node, args: list[str]) -> None:
    proc = node.run("mlnx_qos", "-i", "eth1", "--trust", "dscp", *args, ok=False)
    assert proc.returncode != 0
    assert proc.stderr.strip()
    assert proc.stdout == ""
    assert not (node.root / "qos/eth1.json").exists(), "a rejected call must not apply its valid parts"


def test_unknown_or_unsupported_interface_fails(node: Node) -> None:
    missing = node.run("mlnx_qos", "-i", "eth7", ok=False)
    assert missing.returncode != 0 and missing.stdout == ""
    assert missing.stderr.startswith("Netlink error:") and "eth7" in missing.stderr
    no_dcb = node.run("mlnx_qos", "-i", "eth0", ok=False)  # exists, but no ConnectX behind it
    assert no_dcb.returncode != 0 and no_dcb.stderr.startswith("Netlink error:")
    assert node.run("mlnx_qos", ok=False).returncode != 0


# --- ibv_devinfo ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mtu", "expected"), [(1500, "1024 (3)"), (2200, "2048 (4)"), (4200, "4096 (5)"),
                                               (9000, "4096 (5)")])
def test_active_mtu_follows_the_netdev_mtu(node: Node, mtu: int, expected: str) -> None:
    node.netdev("eth1", mtu=mtu)
    out = node.out("ibv_devinfo")
    assert f"\t\t\tactive_mtu:\t\t{expected}\n" in out
    assert "\t\t\tmax_mtu:\t\t4096 (5)\n" in out


def _layout(line: str) -> str:
    """A tab-formatted line without its value: what must match between two devices."""
    return line.rsplit("\t", 1)[0] if "\t" in line.strip("\t") else line


def test_ibv_devinfo_has_the_layout_of_the_real_tool(node: Node, samples_dir: Path) -> None:
    out = node.out("ibv_devinfo")
    assert out.endswith("\n\n")  # each port ends with a blank line
    mine = out.splitlines()
    # Sample 1 is an older libibverbs that printed `Device ports:`; current rdma-core does not (sample 2).
    real = [line for line in sample(samples_dir, "ibv_devinfo-1.txt") if line != "\tDevice ports:"]
    first_hca = real[:real.index("", real.index("\t\tport:\t2"))]
    first_port = real[:real.index("")]
    assert [_layout(x) for x in mine[:-1]] == [_layout(x) for x in first_port]
    assert len(first_hca) > len(first_port)
    assert mine[0] == "hca_id:\tmlx5_0"
    assert "\t\t\tlink_layer:\t\tEthernet" in mine
    assert "\ttransport:\t\t\tInfiniBand (0)" in mine


def test_ibv_devinfo_of_a_down_connectx7_reads_like_sample_2(node: Node, samples_dir: Path) -> None:
    node.netdev("eth1", mtu=9000, operstate="down", carrier=0)
    node.hw({"hcas": [{"node_guid": "58a2:e103:002a:09b8"}]})
    real = sample(samples_dir, "ibv_devinfo-2.txt")
    mine = shown(node.out("ibv_devinfo"))[:len(real)]
    # The sample is an InfiniBand port (a LID, link layer InfiniBand); everything else is the same.
    differ = {i for i, line in enumerate(real) if "port_lid:" in line or "link_layer:" in line}
    assert [x for i, x in enumerate(mine) if i not in differ] == [x for i, x in enumerate(real) if i not in differ]
    assert [mine[i].split(":")[0] for i in sorted(differ)] == [real[i].split(":")[0] for i in sorted(differ)]


def test_ibv_devinfo_verbose_lists_roce_gids(node: Node) -> None:
    node.addresses("eth1", "192.168.6.132")
    out = node.out("ibv_devinfo", "-v")
    assert "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:5aa2:e1ff:fe2a:09b8, RoCE v1\n" in out
    assert "\t\t\tGID[  1]:\t\tfe80::5aa2:e1ff:fe2a:9b8, RoCE v2\n" in out
    assert "\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c0a8:0684, RoCE v1\n" in out
    assert "\t\t\tGID[  3]:\t\t::ffff:192.168.6.132, RoCE v2\n" in out
    assert "\t\t\tphys_state:\t\tLINK_UP (5)\n" in out
    assert "\tmax_qp:\t\t\t\t" in out


def test_ibv_devinfo_selects_device_and_port(node: Node) -> None:
    node.netdev("eth2", mac="58:a2:e1:2a:09:b9")
    node.hw({"hcas": [{}, {}]})
    assert node.out("ibv_devinfo", "-d", "mlx5_1").startswith("hca_id:\tmlx5_1\n")
    assert node.out("ibv_devinfo", "-l") == "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n"
    assert "\t\tport:\t1\n" in node.out("ibv_devinfo", "-d", "mlx5_0", "-i", "1")
    assert node.run("ibv_devinfo", "-d", "mlx5_9", ok=False).returncode != 0
    assert node.run("ibv_devinfo", "-d", "mlx5_0", "-i", "2", ok=False).returncode != 0


@pytest.mark.parametrize(("operstate", "carrier", "up"), [("up", 1, True), ("unknown", 1, True),
                                                          ("unknown", 0, False), ("down", 0, False)])
def test_port_state_follows_the_netdev_in_every_tool(node: Node, operstate: str, carrier: int, up: bool) -> None:
    node.netdev("eth1", operstate=operstate, carrier=carrier)
    assert ("PORT_ACTIVE (4)" if up else "PORT_DOWN (1)") in node.out("ibv_devinfo")
    ibstat = node.out("ibstat")
    assert ("\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n" if up
            else "\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 10\n") in ibstat
    assert node.out("ibdev2netdev") == f"mlx5_0 port 1 ==> eth1 ({'Up' if up else 'Down'})\n"
    assert node.out("rdma", "link") == ("link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev eth1\n" if up
                                        else "link mlx5_0/1 state DOWN physical_state DISABLED netdev eth1\n")


# --- ibstat, ibdev2netdev, rdma link, show_gids ------------------------------------------------------


def test_ibstat_of_two_roce_cx7_is_sample_3(node: Node, samples_dir: Path) -> None:
    node.netdev("eth1", mac="58:a2:e1:da:e6:26")
    node.netdev("eth2", mac="58:a2:e1:da:e6:27")
    hca = {"fw_ver": "28.39.1002", "rate": 200, "sys_image_guid": "0x58a2e10300dae626"}
    node.hw({"hcas": [hca, hca]})  # node GUIDs derive from the MACs
    assert shown(node.out("ibstat")) == sample(samples_dir, "ibstat-3.txt")
    assert node.out("ibstat", "-l") == "mlx5_0\nmlx5_1\n"
    assert node.out("ibstat", "mlx5_1").startswith("CA 'mlx5_1'\n\tCA type: MT4129\n")
    assert node.run("ibstat", "mlx5_7", ok=False).returncode != 0


def test_ibdev2netdev_and_rdma_link_are_the_samples(node: Node, samples_dir: Path) -> None:
    node.netdev("enp4s0f0np0")
    node.netdev("enp4s0f1np1", mac="58:a2:e1:2a:09:b9")
    node.hw({"hcas": [{"netdev": "enp4s0f0np0"}, {"netdev": "enp4s0f1np1"}]})
    assert node.out("ibdev2netdev").splitlines() == sample(samples_dir, "ibdev2netdev-4.txt")
    expected = sample(samples_dir, "rdma-link-1.txt")
    assert node.out("rdma", "link").splitlines() == expected
    assert node.out("rdma", "link", "show").splitlines() == expected
    assert node.out("rdma", "link", "show", "mlx5_1/1").splitlines() == expected[1:]
    records = json.loads(node.out("rdma", "-j", "link"))
    assert [(r["ifname"], r["port"], r["state"], r["netdev"]) for r in records] == [
        ("mlx5_0", 1, "ACTIVE", "enp4s0f0np0"), ("mlx5_1", 1, "ACTIVE", "enp4s0f1np1")]


def test_rdma_objects_it_does_not_emulate_are_not_faked(node: Node) -> None:
    # Either the real rdma runs (and finds no such object) or the emulation says it has none.
    assert node.run("rdma", "no-such-object", ok=False).returncode != 0


def test_show_gids_spacing_is_sample_3(node: Node, samples_dir: Path) -> None:
    node.netdev("mce0", mac="94:40:c9:8c:a0:9c")
    node.addresses("mce0", "192.168.6.132")
    node.hw({"hcas": [{"netdev": "mce0"}]})
    out = node.out("show_gids")
    assert out.startswith("DEV\tPORT\tINDEX\tGID\t")
    assert shown(out)[:6] == sample(samples_dir, "show_gids-3.txt")[:6]
    assert out.endswith("\nn_gids_found=4\n")
    assert node.out("show_gids", "mlx5_0").count("\nmlx5_0\t") == 4
    assert node.out("show_gids", "mlx5_5").endswith("---\nn_gids_found=0\n")


def test_show_gids_with_a_long_address_shifts_like_the_real_script(node: Node, samples_dir: Path) -> None:
    node.netdev("ens14f0", mac="08:c0:eb:3b:35:3c")
    node.addresses("ens14f0", "192.168.242.56")
    node.hw({"hcas": [{"name": "mlx5_3", "netdev": "ens14f0"}]})
    real = [line for line in sample(samples_dir, "show_gids-1.txt") if line.startswith("mlx5_3")]
    assert shown(node.out("show_gids"))[2:6] == real


def test_gids_survive_ip_failing(node: Node) -> None:
    # No prepared answer: the fake `ip` exits 1, as it would for a netdev it cannot see.
    out = node.out("show_gids")
    assert out.endswith("\nn_gids_found=2\n")
    assert "\tv1\teth1\n" in out and "\tv2\teth1\n" in out


# --- nvidia-smi -------------------------------------------------------------------------------------


def test_topo_matrix_is_sample_4(node: Node, samples_dir: Path) -> None:
    node.hw({
        "gpus": {"count": 4, "nvlink": None, "cpu_affinity": ["0-31,64-95", "32-63,96-127"]},
        "hcas": [{"pci": "0000:0c:00.0", "numa": 0}, {"pci": "0000:0c:00.1", "numa": 0},
                 {"pci": "0000:1f:00.0", "numa": 0}, {"pci": "0000:9f:00.0", "numa": 1}],
    })
    out = node.out("nvidia-smi", "topo", "-m")
    assert out.startswith("\tGPU0\tGPU1\t")
    assert shown(out) == sample(samples_dir, "nvidia-smi-topo-4.txt")


def test_topo_matrix_of_the_default_node(node: Node) -> None:
    lines = node.out("nvidia-smi", "topo", "-m").splitlines()
    assert lines[0].split("\t") == ["", *(f"GPU{i}" for i in range(8)), "NIC0", "CPU Affinity",
                                    "NUMA Affinity", "GPU NUMA ID"]
    assert lines[1].split("\t")[:3] == ["GPU0", " X ", "NV18"]
    assert lines[1].split("\t")[9:11] == ["NODE", "0-51,104-155"]
    assert lines[8].split("\t")[9:11] == ["SYS", "52-103,156-207"]
    assert lines[-1] == "  NIC0: mlx5_0"


def test_nvidia_smi_lists_gpus_and_needs_the_driver(node: Node) -> None:
    node.hw({"gpus": {"count": 2, "model": "NVIDIA A100-SXM4-80GB"}})
    listed = node.out("nvidia-smi", "-L").splitlines()
    assert [line.split(" (UUID: GPU-")[0] for line in listed] == [
        "GPU 0: NVIDIA A100-SXM4-80GB", "GPU 1: NVIDIA A100-SXM4-80GB"]
    assert node.out("nvidia-smi", "-L") == node.out("nvidia-smi", "-L"), "UUIDs are stable"
    assert node.out("nvidia-smi", "--query-gpu=index,name,memory.total",
                    "--format=csv,noheader,nounits") == "0, NVIDIA A100-SXM4-80GB, 81559\n" \
                                                        "1, NVIDIA A100-SXM4-80GB, 81559\n"
    assert "NVIDIA-SMI 535.129.03" in node.out("nvidia-smi")
    node.hw({"modules": {"nvidia": False}})
    assert node.run("nvidia-smi", ok=False).returncode == 9
    node.hw({"gpus": {"count": 0}})
    assert node.run("nvidia-smi", "-L", ok=False).returncode == 6


# --- ofed_info, cma_roce_tos ------------------------------------------------------------------------


def test_ofed_info_prints_the_profile_version(node: Node, samples_dir: Path) -> None:
    assert node.out("ofed_info", "-s") == "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"
    assert node.out("ofed_info", "-n") == "23.10-1.1.9.0\n"
    assert node.out("ofed_info").startswith("MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):\n")
    node.hw({"ofed": "MLNX_OFED_LINUX-23.07-0.5.1.2"})
    assert node.out("ofed_info", "-s").splitlines() == sample(samples_dir, "ofed_info-s-1.txt")
    node.hw({"ofed": "OFED-internal-4.7-3.2.9"})
    assert node.out("ofed_info", "-s") == "OFED-internal-4.7-3.2.9\n"
    node.hw({"ofed": None})
    assert node.run("ofed_info", "-s", ok=False).returncode == 127


def test_cma_roce_tos_reads_and_persists(node: Node) -> None:
    node.hw({"roce_tos": {"mlx5_0": 32}})
    assert node.out("cma_roce_tos", "-d", "mlx5_0") == "32\n"
    assert node.out("cma_roce_tos", "-d", "mlx5_0", "-t", "106") == ""
    assert node.out("cma_roce_tos", "-d", "mlx5_0", "-p", "1") == "106\n"
    tos_file = node.root / "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
    assert tos_file.read_text() == "106\n"
    assert node.run("cma_roce_tos", "-d", "mlx5_4", ok=False).returncode != 0
    assert node.run("cma_roce_tos", "-d", "mlx5_0", "-t", "256", ok=False).returncode != 0
    assert tos_file.read_text() == "106\n"


# --- modules ----------------------------------------------------------------------------------------


def _lsmod(node: Node) -> dict[str, list[str]]:
    lines = node.out("lsmod").splitlines()
    assert lines[0] == "Module                  Size  Used by"
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_modprobe_and_lsmod_track_emulated_modules(node: Node) -> None:
    before = _lsmod(node)
    assert "nvidia_peermem" not in before and before["mlx5_core"][:2] == ["2437120", "1"]
    assert node.run("modprobe", "nvidia_peermem").stdout == ""
    lines = node.out("lsmod").splitlines()
    assert "nvidia_peermem         16384  0" in lines
    assert "nvidia_peermem" in _lsmod(node)["nvidia"][2].split(",")
    in_use = node.run("modprobe", "-r", "nvidia", ok=False)
    assert in_use.returncode == 1 and "in use" in in_use.stderr
    node.run("modprobe", "-r", "nvidia_peermem")
    assert "nvidia_peermem" not in _lsmod(node)
    gone = node.run("modprobe", "-r", "nvidia_peermem", ok=False)
    assert gone.returncode == 1 and "not in kernel" in gone.stderr
    assert node.run("modprobe", "-q", "-r", "nvidia_peermem", ok=False).stderr == ""
    assert node.run("modprobe", "fabnet_no_such_module_xyz", ok=False).returncode != 0


def test_hw_json_modules_set_the_start_and_loading_pulls_dependencies(node: Node) -> None:
    node.hw({"modules": {"nvidia_peermem": True, "nvidia": False, "nvidia_uvm": False}})
    # A profile may say a module is loaded without its dependencies; modprobe then loads them.
    assert "nvidia_peermem" in _lsmod(node)
    node.hw({"modules": {"nvidia": False, "nvidia_uvm": False}})
    node.run("modprobe", "nvidia-peermem")
    assert {"nvidia", "nvidia_peermem"} <= set(_lsmod(node))


def test_unloading_mlx5_ib_takes_the_rdma_devices_away(node: Node) -> None:
    node.run("modprobe", "-r", "mlx5_ib")
    assert "mlx5_core" not in _lsmod(node)  # no longer needed by anything, so it went too
    assert node.run("ibv_devinfo", ok=False).returncode != 0
    assert node.out("ibdev2netdev") == ""
    assert node.out("show_gids").endswith("n_gids_found=0\n")
    assert node.run("mlnx_qos", "-i", "eth1", ok=False).returncode != 0
    node.run("modprobe", "mlx5_ib")
    assert node.out("ibdev2netdev") == "mlx5_0 port 1 ==> eth1 (Up)\n"


# --- fabnet-lab-init, profile, wrappers -------------------------------------------------------------


def test_init_writes_the_sysfs_tree_from_the_profile(node: Node) -> None:
    node.hw({"ecn": {"eth1": {"np": [0, 0, 0, 1, 0, 0, 0, 0], "rp": [0, 0, 0, 1, 0, 0, 0, 1],
                              "cnp_dscp": 46}},
             "traffic_class": {"mlx5_0": 106}})
    node.run("mlnx_qos", "-i", "eth1", "--trust", "dscp")
    node.run("modprobe", "nvidia_peermem")
    node.run("fabnet-lab-init")
    ecn = node.root / "sys/class/net/eth1/ecn"
    assert [(ecn / "roce_np/enable" / str(p)).read_text() for p in range(8)] == [
        "0\n", "0\n", "0\n", "1\n", "0\n", "0\n", "0\n", "0\n"]
    assert (ecn / "roce_rp/enable/7").read_text() == "1\n"
    assert (ecn / "roce_np/cnp_dscp").read_text() == "46\n"
    tclass = node.root / "sys/class/infiniband/mlx5_0/tc/1/traffic_class"
    assert tclass.read_text() == "Global tclass=106\n"
    # Live state goes back to the profile.
    assert "Priority trust state: pcp" in node.out("mlnx_qos", "-i", "eth1")
    assert "nvidia_peermem" not in _lsmod(node)


def test_init_defaults(node: Node) -> None:
    (node.root / "hw.json").unlink()  # no profile at all: the defaults
    node.run("fabnet-lab-init")
    ecn = node.root / "sys/class/net/eth1/ecn"
    assert {(ecn / kind / "enable" / str(p)).read_text() for kind in ("roce_np", "roce_rp")
            for p in range(8)} == {"0\n"}
    assert (ecn / "roce_np/cnp_dscp").read_text() == "48\n"
    assert (node.root / "sys/class/infiniband/mlx5_0/tc/1/traffic_class").read_text() == ""
    assert node.out("ibdev2netdev") == "mlx5_0 port 1 ==> eth1 (Up)\n"
    assert len(node.out("nvidia-smi", "-L").splitlines()) == 8


def test_init_ties_each_netdev_and_rdma_device_through_their_pci_function_as_sysfs_does(node: Node) -> None:
    node.run("fabnet-lab-init")
    assert [p.name for p in (node.root / "sys/class/net/eth1/device/infiniband").iterdir()] == ["mlx5_0"]
    assert [p.name for p in (node.root / "sys/class/infiniband/mlx5_0/device/net").iterdir()] == ["eth1"]
    node.hw({"hcas": [{"name": "mlx5_3", "netdev": "ens1f0np0"}]})  # a profile that moved it: no stale tie
    node.run("fabnet-lab-init")
    assert not (node.root / "sys/class/net/eth1/device").exists()
    assert not (node.root / "sys/class/infiniband/mlx5_0/device").exists()
    assert [p.name for p in (node.root / "sys/class/net/ens1f0np0/device/infiniband").iterdir()] == ["mlx5_3"]
    assert node.out("rdma", "link", "show").split()[:2] == ["link", "mlx5_3/1"]


@pytest.mark.parametrize(("hw", "where"), [
    ({"gpus": {"count": "eight"}}, "gpus.count"), ({"hcas": [{"rate": 300}]}, "hcas[0].rate"),
    ({"hcas": [{"node_guid": "nope"}]}, "hcas[0].node_guid"),
    ({"qos": {"eth1": {"pfc": [1, 1]}}}, "qos.eth1.pfc"), ({"traffic_class": {"mlx5_0": "x"}}, "traffic_class"),
])
def test_a_bad_profile_names_the_key(node: Node, hw: dict[str, Any], where: str) -> None:
    node.hw(hw)
    command = ["mlnx_qos", "-i", "eth1"] if "qos" in hw else ["nvidia-smi", "-L"]
    proc = node.run(*command, ok=False)
    assert proc.returncode == 1
    assert where in proc.stderr and "fabnet lab emulation" in proc.stderr


def test_a_broken_hw_json_is_reported(node: Node) -> None:
    (node.root / "hw.json").write_text("{not json")
    proc = node.run("ibstat", ok=False)
    assert proc.returncode == 1 and "hw.json" in proc.stderr


@pytest.mark.parametrize("command", [*emulation.COMMANDS, emulation.INIT_COMMAND])
def test_every_command_admits_it_is_the_lab_emulation(node: Node, command: str) -> None:
    out = node.out(command, "--lab-info")
    assert out.startswith(f"{command}: fabnet lab emulation")


def test_wrapper_runs_the_script_as_the_command(node: Node, tmp_path: Path) -> None:
    text = emulation.wrapper_script("mlnx_qos")
    assert text == ('#!/bin/sh\nexec /usr/bin/python3 -I -S /usr/local/lib/fabnet-lab/labhw '
                    '--as mlnx_qos "$@"\n')
    wrapper = tmp_path / "ofed_info"
    wrapper.write_text(emulation.wrapper_script("ofed_info", python=sys.executable, script=str(LABHW)))
    wrapper.chmod(0o755)
    env = {**os.environ, "FABNET_LAB_HW_ROOT": str(node.root)}
    proc = subprocess.run([str(wrapper), "-s"], capture_output=True, text=True, env=env, check=True)
    assert proc.stdout == "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"
    with pytest.raises(LabError):
        emulation.wrapper_script("rm -rf /")


def test_argv0_names_the_command_too(node: Node, tmp_path: Path) -> None:
    link = tmp_path / "ibdev2netdev"
    link.symlink_to(LABHW)
    env = {**os.environ, "FABNET_LAB_HW_ROOT": str(node.root), "FABNET_LAB_NET_SYSFS": str(node.net)}
    proc = subprocess.run([sys.executable, str(link)], capture_output=True, text=True, env=env, check=True)
    assert proc.stdout == "mlx5_0 port 1 ==> eth1 (Up)\n"


def test_the_package_is_standalone_with_one_module_per_tool() -> None:
    for module in LABHW.glob("*.py"):
        source = module.read_text()
        assert "import provisioner" not in source and "from provisioner" not in source, module
        assert len(source.splitlines()) < 400, module
    assert (LABHW / "__main__.py").read_text().startswith("#!/usr/bin/python3\n")
    tools = {path.stem for path in LABHW.glob("*.py")}
    assert {"ofed_info", "mlnx_qos", "ibv_devinfo", "ibstat", "ibdev2netdev", "show_gids", "rdma", "nvidia_smi",
            "cma_roce_tos", "lsmod"} <= tools


# --- round trips through fabnet's own parsers -------------------------------------------------------


@pytest.fixture
def parse() -> Any:
    parsers = pytest.importorskip("provisioner.parsers")
    return parsers.parse


def test_round_trip_mlnx_qos(node: Node, parse: Any) -> None:
    out = node.out("mlnx_qos", "-i", "eth1", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0",
                   "--dscp2prio", "set,48,3", "-s", "ets,ets,ets,ets,ets,ets,ets,ets",
                   "-t", "10,10,10,40,10,10,5,5", "-p", "0,0,0,3,0,0,0,0")
    facts = parse("mlnx_qos", out)
    state = json.loads((node.root / "qos/eth1.json").read_text())
    assert facts["trust"] == state["trust"] == "dscp"
    assert [int(p in facts["pfc_enabled"]) for p in range(8)] == state["pfc"]
    assert [facts["dscp2prio"][str(d)] if str(d) in facts["dscp2prio"] else facts["dscp2prio"][d]
            for d in range(64)] == state["dscp2prio"]
    assert [tc["bw"] for tc in facts["tcs"]] == state["tcbw"]
    assert {p: tc["tc"] for tc in facts["tcs"] for p in tc["priorities"]} == dict(enumerate(state["prio_tc"]))
    assert facts["cable_len"] == 7 and facts["receive_buffer"] == state["buffer_size"]


def test_round_trip_rdma_views(node: Node, parse: Any) -> None:
    node.netdev("eth1", mtu=9000)
    node.addresses("eth1", "10.0.0.5")
    port = parse("ibv_devinfo", node.out("ibv_devinfo", "-v"))["devices"][0]["ports"][0]
    assert (port["state"], port["active_mtu"], port["max_mtu"], port["link_layer"]) == (
        "PORT_ACTIVE", 4096, 4096, "Ethernet")
    assert [g["type"] for g in port["gids"]] == ["RoCE v1", "RoCE v2", "RoCE v1", "RoCE v2"]
    ca = parse("ibstat", node.out("ibstat"))["cas"][0]
    assert (ca["name"], ca["firmware"], ca["ports"][0]["rate"], ca["ports"][0]["state"]) == (
        "mlx5_0", "28.39.2048", 400, "Active")
    assert ca["ports"][0]["port_guid"] == "0x5aa2e1fffe2a09b8"
    status = parse("ibstatus", node.out("ibstatus"))["ports"][0]
    assert (status["state"], status["rate"], status["link_layer"]) == ("ACTIVE", 400, "Ethernet")
    links = parse("ibdev2netdev", node.out("ibdev2netdev"))["links"]
    assert [(x["device"], x["port"], x["netdev"], x["state"]) for x in links] == [("mlx5_0", 1, "eth1", "Up")]
    rdma = parse("rdma_link", node.out("rdma", "link"))["links"]
    assert [(x["device"], x["state"], x["netdev"]) for x in rdma] == [("mlx5_0", "ACTIVE", "eth1")]
    gids = parse("show_gids", node.out("show_gids"))
    assert gids["n_gids_found"] == 4
    assert [(g["index"], g["ipv4"], g["version"]) for g in gids["gids"]] == [
        (0, None, "v1"), (1, None, "v2"), (2, "10.0.0.5", "v1"), (3, "10.0.0.5", "v2")]


def test_round_trip_topo_and_ofed(node: Node, parse: Any) -> None:
    topo = parse("nvidia_smi_topo", node.out("nvidia-smi", "topo", "-m"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)] and topo["nics"] == ["NIC0"]
    assert topo["nic_legend"] == {"NIC0": "mlx5_0"}
    assert topo["matrix"]["GPU0"]["GPU1"] == "NV18" and topo["matrix"]["GPU7"]["NIC0"] == "SYS"
    assert topo["cpu_affinity"]["GPU4"] == "52-103,156-207"
    ofed = parse("ofed_info", node.out("ofed_info", "-s"))
    assert ofed["package"] == "MLNX_OFED_LINUX-23.10-1.1.9.0" and ofed["version"] == "23.10-1.1.9.0"


# --- ethtool -S ----------------------------------------------------------------------------------------


def test_ethtool_statistics_are_the_counter_files_and_fail_as_ethtool_does(node: Node) -> None:
    from provisioner.parsers.ethtool_stats import parse_ethtool_stats

    stats = node.root / "sys/class/net/eth1/ethtool_stats"
    stats.mkdir(parents=True)
    for name, value in (("rx_discards_phy", 40), ("rx_prio3_pause", 7), ("tx_pause_storm_error_events", 0)):
        (stats / name).write_text(f"{value}\n")
    out = node.out("ethtool", "-S", "eth1")
    assert out.splitlines() == ["NIC statistics:", "     rx_discards_phy: 40", "     rx_prio3_pause: 7",
                                "     tx_pause_storm_error_events: 0"]
    assert parse_ethtool_stats(out).counters == {"rx_discards_phy": 40, "rx_prio3_pause": 7,
                                                 "tx_pause_storm_error_events": 0}
    # ethtool 6.1's words and exit statuses: a netdev that does not exist, and one whose driver has none.
    missing = node.run("ethtool", "-S", "eth9", ok=False)
    assert (missing.returncode, missing.stderr.strip()) == (96, "Cannot get stats strings information: No such device")
    bare = node.run("ethtool", "-S", "eth0", ok=False)
    assert (bare.returncode, bare.stderr.strip()) == (94, "no stats available")
