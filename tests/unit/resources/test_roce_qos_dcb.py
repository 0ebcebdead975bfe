"""roce_qos read with iproute2's `dcb`: the facts from its report, and the fallback to mlnx_qos, run in a real shell."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import RoceQosSpec
from provisioner.resources import roce_qos
from provisioner.resources.base import HostContext

from ._recorded import run, sample
from .test_roce_qos import _tool

QOS = "mlnx_qos -i"  # the one QoS probe: dcb first, mlnx_qos in its else branch

# `dcb -N app show dev eth1 dscp-prio`, `dcb pfc show dev eth1 prio-pfc` and `dcb ets show dev eth1 tc-tsa tc-bw
# prio-tc` in a row, in the layout iproute2 prints (a space after every item): trust dscp with the default
# map (DSCP d to priority d >> 3), PFC on priority 3, ETS 10% x 7 + 30%.
DSCP_ROW = "dscp-prio " + "".join(f"{d}:{d >> 3} " for d in range(64)) + "\n"
PFC_ROW = "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"
ETS_ROWS = ("tc-tsa " + "".join(f"{tc}:ets " for tc in range(8)) + "\n"
            "tc-bw 0:10 1:10 2:10 3:10 4:10 5:10 6:10 7:30 \n"
            "prio-tc 0:1 1:0 2:2 3:3 4:4 5:5 6:6 7:7 \n")
DCB_DSCP = DSCP_ROW + PFC_ROW + ETS_ROWS
DCB_PCP = PFC_ROW.replace("3:on", "3:off") + ETS_ROWS.replace(":ets", ":vendor")  # no DSCP rows: trust pcp

FULL = {"interface": "eth1", "trust": "dscp", "pfc": [3], "dscp2prio": {26: 3, 48: 6},
        "tsa": ["ets"] * 8, "tcbw": [10] * 7 + [30]}


def test_a_dcb_report_is_read_like_mlnx_qos() -> None:
    assert run("roce_qos", FULL, {QOS: DCB_DSCP}).summary() == [
        ("trust", "ok", "dscp", "dscp"), ("pfc", "ok", "3", "3"), ("dscp2prio[26]", "ok", "3", "3"),
        ("dscp2prio[48]", "ok", "6", "6"), ("tsa", "ok", ",".join(["ets"] * 8), ",".join(["ets"] * 8)),
        ("tcbw", "ok", "10,10,10,10,10,10,10,30", "10,10,10,10,10,10,10,30"),
    ]


def test_no_dscp_rows_mean_trust_pcp_and_no_mapping() -> None:
    result = run("roce_qos", FULL, {QOS: DCB_PCP})
    assert result.summary() == [
        ("trust", "drift", "dscp", "pcp"), ("pfc", "drift", "3", "none"), ("dscp2prio[26]", "drift", "3", "none"),
        ("dscp2prio[48]", "drift", "6", "none"),
        ("tsa", "drift", "ets,ets,ets,ets,ets,ets,ets,ets", "vendor,vendor,vendor,vendor,vendor,vendor,vendor,vendor"),
        ("tcbw", "drift", "10,10,10,10,10,10,10,30", "0,0,0,0,0,0,0,0"),  # no bandwidth outside ets, as mlnx_qos
    ]
    assert result.checks[2].message == "no mapping for this DSCP (trust pcp)"


def test_the_same_state_read_by_either_tool_gives_the_same_checks() -> None:
    # mlnx_qos-3 is a real mlnx_qos report: trust dscp with the default map, no PFC, vendor classes.
    spec = {**FULL, "dscp2prio": {d: d >> 3 for d in range(0, 64, 7)}}
    by_mlnx_qos = run("roce_qos", spec, {QOS: sample("mlnx_qos-3.txt")}).summary()
    assert by_mlnx_qos == run("roce_qos", spec, {QOS: DSCP_ROW + DCB_PCP}).summary()
    assert [check[1] for check in by_mlnx_qos] == ["ok", "drift"] + ["ok"] * 10 + ["drift", "drift"]


def test_a_dcb_row_cut_short_is_an_error_not_ok() -> None:
    cut = DSCP_ROW + "prio-pfc 0:off 1:off 2:off 3:on\n" + ETS_ROWS
    checks = run("roce_qos", {"interface": "eth1", "trust": "dscp", "pfc": [3]}, {QOS: cut}).checks
    assert [(c.attribute, c.status) for c in checks] == [("trust", "error"), ("pfc", "error")]
    assert "incomplete; missing prio-pfc entries for 4, 5, 6, 7" in checks[0].message


def test_dcb_without_the_ets_rows_is_an_error() -> None:
    checks = run("roce_qos", {"interface": "eth1", "tsa": ["ets"] * 8}, {QOS: DSCP_ROW + PFC_ROW}).checks
    assert (checks[0].status, checks[0].message) == ("error", "cannot parse dcb output: no tc-tsa, tc-bw, prio-tc "
                                                              "in the dcb output")


# ------------------------------------------------------------------- which tool answers, in a real shell

# A dcb that answers the three reads fabnet asks, one per line of a batch on standard input (`-N -b -`),
# stopping at the first line it cannot answer, as the real one does.
FAKE_DCB = f"""[ "$*" = "-N -b -" ] || {{ echo "not a batch on stdin: $*" >&2; exit 2; }}
n=0
while IFS= read -r line; do
  n=$((n + 1))
  case "$line" in
    "app show dev eth1 dscp-prio") printf %s {shlex.quote(DSCP_ROW)} ;;
    "pfc show dev eth1 prio-pfc") printf %s {shlex.quote(PFC_ROW)} ;;
    "ets show dev eth1 tc-tsa tc-bw prio-tc") printf %s {shlex.quote(ETS_ROWS)} ;;
    *) echo "Attribute read: No such device" >&2; echo "Command failed -:$n" >&2; exit 1 ;;
  esac
done
"""


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH with an mlnx_qos that prints its arguments, one per line; tests add a `dcb`."""
    tools = tmp_path / "bin"
    tools.mkdir()
    _tool(tools, "mlnx_qos", "echo mlnx_qos; for a in \"$@\"; do printf '%s\\n' \"$a\"; done\n")
    return tools


def _read_qos(bin_dir: Path, sysfs: Path, interface: str = "eth1") -> subprocess.CompletedProcess[str]:
    spec = RoceQosSpec.model_construct(interface=interface, trust="dscp")
    (probe,) = roce_qos.probes(spec, HostContext("h", str(sysfs)))
    return subprocess.run(["/bin/sh", "-c", probe.command], capture_output=True, text=True, check=False,
                          env={"PATH": str(bin_dir)})


def test_dcb_answers_when_it_can(bin_dir: Path, tmp_path: Path) -> None:
    _tool(bin_dir, "dcb", FAKE_DCB)
    done = _read_qos(bin_dir, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, DCB_DSCP, "")


def test_mlnx_qos_answers_without_dcb_or_when_dcb_fails(bin_dir: Path, tmp_path: Path) -> None:
    assert _read_qos(bin_dir, tmp_path).stdout == "mlnx_qos\n-i\neth1\n"  # no dcb installed
    _tool(bin_dir, "dcb", FAKE_DCB)
    done = _read_qos(bin_dir, tmp_path, "eth2")  # the driver refuses dcb for this port
    assert (done.returncode, done.stdout, done.stderr) == (0, "mlnx_qos\n-i\neth2\n", "")  # dcb's error hidden


def test_a_half_answered_dcb_is_not_used(bin_dir: Path, tmp_path: Path) -> None:
    # An iproute2 with `pfc` and `ets` but without `app` (5.11) fails the first call: no dcb output at all.
    _tool(bin_dir, "dcb", 'IFS= read -r first; case "$first" in app*) echo \'Object "app" is unknown\' >&2; '
                          'exit 1 ;; esac\n' + FAKE_DCB)
    assert _read_qos(bin_dir, tmp_path).stdout == "mlnx_qos\n-i\neth1\n"


def test_a_sysfs_trust_file_means_mlnx_qos(bin_dir: Path, tmp_path: Path) -> None:
    # Older MLNX_OFED keeps the trust mode in sysfs, outside the DCB app table: only mlnx_qos reads it.
    _tool(bin_dir, "dcb", FAKE_DCB)
    (tmp_path / "class/net/eth1/qos").mkdir(parents=True)
    (tmp_path / "class/net/eth1/qos/trust").write_text("dscp\n")
    assert _read_qos(bin_dir, tmp_path).stdout == "mlnx_qos\n-i\neth1\n"


def test_a_hostile_netdev_name_is_never_run_by_the_shell(bin_dir: Path, tmp_path: Path) -> None:
    # Refused at validate time; here past that check, the shell still reads none of it as code: the batch
    # dcb gets holds the name as shlex quoted it, inert (dcb would read it as three odd words, no more).
    _tool(bin_dir, "dcb", "for a in \"$@\"; do printf '<%s>' \"$a\"; done; echo\n"
                          "while IFS= read -r line; do printf '%s\\n' \"$line\"; done\n")
    name = "e'th;$(touch pwned) `touch pwned2` \"y\""
    done = _read_qos(bin_dir, tmp_path, name)
    quoted = shlex.quote(name)
    assert done.stdout.splitlines() == [
        "<-N><-b><->", f"app show dev {quoted} dscp-prio", f"pfc show dev {quoted} prio-pfc",
        f"ets show dev {quoted} tc-tsa tc-bw prio-tc",
    ]
    assert not list(tmp_path.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))
    # mlnx_qos gets it as one word.
    (tmp_path / "bin" / "dcb").unlink()
    assert _read_qos(bin_dir, tmp_path, name).stdout.splitlines() == ["mlnx_qos", "-i", name]
