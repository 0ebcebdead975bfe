"""The lab's `dcb`: iproute2's formats for the state the emulated mlnx_qos keeps, read-only, real errors."""

from __future__ import annotations

import pytest

from provisioner.parsers.dcb import parse_dcb, qos_of
from provisioner.parsers.mlnx_qos import parse_mlnx_qos
from tests.unit.lab.test_labhw import Node
from tests.unit.lab.test_labhw import node as node  # the fixture, used by name

PFC_OFF = "prio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off \n"


def test_default_state_reads_trust_pcp_no_pfc_vendor_classes(node: Node) -> None:
    assert node.out("dcb", "-N", "app", "show", "dev", "eth1") == ""  # no app entries at all
    assert node.out("dcb", "pfc", "show", "dev", "eth1") == "pfc-cap 8 macsec-bypass off delay 7 \n" + PFC_OFF
    assert node.out("dcb", "ets", "show", "dev", "eth1").splitlines() == [
        "willing off ets-cap 8 cbs off ",
        "tc-bw 0:100 1:100 2:100 3:100 4:100 5:100 6:100 7:100 ",
        "pg-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 ",
        "tc-tsa 0:vendor 1:vendor 2:vendor 3:vendor 4:vendor 5:vendor 6:vendor 7:vendor ",
        "prio-tc 0:1 1:0 2:2 3:3 4:4 5:5 6:6 7:7 ",
        "reco-tc-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 ",
        "reco-tc-tsa 0:strict 1:strict 2:strict 3:strict 4:strict 5:strict 6:strict 7:strict ",
        "reco-prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 ",
    ]
    assert node.out("dcb", "dcbx", "show", "dev", "eth1") == "host ieee \n"


def test_mlnx_qos_setters_show_up_in_every_object(node: Node) -> None:
    node.out("mlnx_qos", "-i", "eth1", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0", "--tsa",
             "ets,ets,ets,ets,ets,ets,ets,strict", "--tcbw", "10,10,10,10,10,10,40,0", "--cable_len", "30")
    node.out("mlnx_qos", "-i", "eth1", "--dscp2prio", "set,26,5")
    app = node.out("dcb", "-N", "app", "show", "dev", "eth1", "dscp-prio")
    assert app == "dscp-prio " + "".join(f"{d}:{5 if d == 26 else d >> 3} " for d in range(64)) + "\n"
    assert node.out("dcb", "pfc", "show", "dev", "eth1", "delay", "prio-pfc") == (
        "delay 30 \nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n")
    assert node.out("dcb", "ets", "show", "dev", "eth1", "tc-tsa", "tc-bw") == (
        "tc-tsa 0:ets 1:ets 2:ets 3:ets 4:ets 5:ets 6:ets 7:strict \n"
        "tc-bw 0:10 1:10 2:10 3:10 4:10 5:10 6:40 7:0 \n")
    node.out("mlnx_qos", "-i", "eth1", "--trust", "pcp")
    assert node.out("dcb", "-N", "app", "show", "dev", "eth1", "dscp-prio") == ""


def test_dcb_and_mlnx_qos_give_fabnet_the_same_facts(node: Node) -> None:
    node.out("mlnx_qos", "-i", "eth1", "--trust", "dscp", "--pfc", "0,0,0,1,1,0,0,0", "--prio_tc", "0,1,2,3,4,5,6,7")
    text = "".join(node.out("dcb", *call) for call in (
        ("-N", "app", "show", "dev", "eth1", "dscp-prio"), ("pfc", "show", "dev", "eth1", "prio-pfc"),
        ("ets", "show", "dev", "eth1", "tc-tsa", "tc-bw", "prio-tc")))
    by_dcb = qos_of(parse_dcb(text))
    by_mlnx_qos = parse_mlnx_qos(node.out("mlnx_qos", "-i", "eth1"))
    for field in ("trust", "dscp2prio", "pfc_enabled"):
        assert getattr(by_dcb, field) == getattr(by_mlnx_qos, field), field
    assert [(t.tc, t.tsa, t.bw, t.priorities) for t in by_dcb.tcs] == \
        [(t.tc, t.tsa, t.bw, t.priorities) for t in by_mlnx_qos.tcs]


def test_keywords_match_by_prefix_in_the_real_tools_order(node: Node) -> None:
    assert node.out("dcb", "p", "sh", "d", "eth1", "p") == PFC_OFF  # pfc show dev eth1 prio-pfc
    assert node.out("dcb", "e", "show", "dev", "eth1", "tc") == (
        "tc-tsa 0:vendor 1:vendor 2:vendor 3:vendor 4:vendor 5:vendor 6:vendor 7:vendor \n")


def test_names_without_numeric_and_a_batch(node: Node, tmp_path) -> None:
    node.out("mlnx_qos", "-i", "eth1", "--trust", "dscp")
    named = node.out("dcb", "app", "show", "dev", "eth1").split()
    assert named[1] == "0:0"  # DS field 0 is printed as a number whatever its name
    names = {"CS3": "24", "AF31": "26", "EF": "46"}
    rt_dsfield = [item.split(":")[0] for item in named[1:]]
    numeric = node.out("dcb", "-N", "app", "show", "dev", "eth1").split()[1:]
    assert len(rt_dsfield) == len(numeric) == 64
    for name, number in names.items():  # named where this machine's rt_dsfield names them, else numbers
        assert name in rt_dsfield or number in rt_dsfield
    batch = tmp_path / "cmds"
    batch.write_text("pfc show dev eth1 prio-pfc\n\n# comment\nets show dev eth1 prio-tc\n")
    assert node.out("dcb", "-N", "-b", str(batch)) == PFC_OFF + "prio-tc 0:1 1:0 2:2 3:3 4:4 5:5 6:6 7:7 \n"
    batch.write_text("pfc show dev eth9\nets show dev eth1 prio-tc\n")
    failed = node.run("dcb", "-b", str(batch), ok=False)
    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr.splitlines() == ["Attribute read: No such device", f"Command failed {batch}:1"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (("pfc", "show", "dev", "eth9"), 1, "Attribute read: No such device"),
    (("pfc", "show", "dev", "eth0"), 1, "Attribute read: Operation not supported"),  # no ConnectX behind it
    (("pfc", "set", "dev", "eth1", "prio-pfc", "3:on"), 1, "only `dcb pfc show` is emulated"),
    (("buffer", "show", "dev", "eth1"), 1, "`dcb buffer` is not emulated"),
    (("nosuch", "show"), 1, 'Object "nosuch" is unknown'),
    (("ets", "show", "eth1"), 1, "Expected `dev DEV', not `eth1'"),
    (("ets", "show", "dev", "eth1", "bogus"), 1, 'What is "bogus"?'),
    (("-j", "pfc", "show", "dev", "eth1"), 1, "JSON output (-j) is not emulated"),
])
def test_errors_are_the_real_tools_or_say_what_is_not_emulated(node: Node, args: tuple[str, ...], code: int,
                                                               message: str) -> None:
    proc = node.run("dcb", *args, ok=False)
    assert (proc.returncode, proc.stdout) == (code, "")
    assert message in proc.stderr


def test_no_rdma_modules_means_no_dcb(node: Node) -> None:
    node.out("modprobe", "-r", "mlx5_ib")
    proc = node.run("dcb", "pfc", "show", "dev", "eth1", ok=False)
    assert (proc.returncode, proc.stderr.strip()) == (1, "Attribute read: Operation not supported")
