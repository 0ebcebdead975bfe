"""iproute2 `dcb` reports: the recorded samples, layouts that vary, cut rows, bad values, and the mlnx_qos facts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.errors import ParseError
from provisioner.parsers.dcb import DSCP_NAMES, TSA_NAMES, parse_dcb, qos_of

from ._samples import read


def test_pfc_sample() -> None:
    report = parse_dcb(read("dcb-pfc-1.txt"))
    assert (report.pfc_cap, report.macsec_bypass, report.delay) == (4, False, 0)
    assert report.prio_pfc == dict.fromkeys(range(8), False)
    assert (report.complete, report.unplaced) == (True, [])


def test_ets_sample_in_the_order_asked() -> None:
    report = parse_dcb(read("dcb-ets-1.txt"))
    assert report.prio_tc == {p: p for p in range(8)}
    assert report.tc_tsa == {0: "ets", 1: "ets", 2: "ets", **dict.fromkeys(range(3, 8), "strict")}
    assert report.tc_bw == {0: 33, 1: 33, 2: 34, **dict.fromkeys(range(3, 8), 0)}


def test_app_sample_with_names_and_a_dscp_given_two_priorities() -> None:
    report = parse_dcb(read("dcb-app-1.txt"))
    assert report.dscp_prio == [(0, 0), (24, 2), (24, 3), (48, 6)]
    assert report.dscp_map == {0: 0, 24: 3, 48: 6}  # the highest priority of a DSCP wins


def test_rows_joined_on_one_line() -> None:
    report = parse_dcb(read("dcb-4-joined.txt"))
    assert (report.pfc_cap, report.delay) == (8, 0)
    assert [p for p, on in report.prio_pfc.items() if on] == [3]
    assert report.dscp_map == {26: 3, 48: 6}  # AF31, CS6


def test_a_row_wrapped_over_lines_and_a_pasted_prompt() -> None:
    text = "$ dcb ets show dev eth1 prio-tc\nprio-tc 0:1 1:0 2:2 3:3\n 4:4 5:5 6:6 7:7 \n"
    report = parse_dcb(text)
    assert report.prio_tc == {0: 1, 1: 0, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}
    assert report.complete


def test_every_row_of_a_full_show_is_kept() -> None:
    text = ("willing off ets-cap 8 cbs off \ntc-bw 0:100 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n"
            "pg-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \ntc-tsa 0:vendor 1:vendor 2:vendor 3:vendor 4:vendor 5:vendor "
            "6:vendor 7:vendor \nprio-tc 0:1 1:0 2:2 3:3 4:4 5:5 6:6 7:7 \n"
            "reco-tc-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n"
            "reco-tc-tsa 0:strict 1:strict 2:strict 3:strict 4:strict 5:strict 6:strict 7:strict \n"
            "reco-prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n"
            "requests 0:0 1:0 2:0 3:12 4:0 5:0 6:0 7:0 \ndefault-prio 3 5 \n")
    report = parse_dcb(text)
    assert (report.willing, report.ets_cap, report.cbs) == (False, 8, False)
    assert report.pg_bw == dict.fromkeys(range(8), 0)
    assert report.default_prio == [3, 5]
    assert report.other["reco-tc-tsa"].startswith("0:strict 1:strict")
    assert report.other["requests"] == "0:0 1:0 2:0 3:12 4:0 5:0 6:0 7:0"
    assert (report.complete, report.unplaced) == (True, [])


def test_a_row_cut_short_is_incomplete() -> None:
    report = parse_dcb("prio-pfc 0:off 1:off 2:off 3:on\n")
    assert not report.complete
    assert report.missing == ["prio-pfc entries for 4, 5, 6, 7"]


@pytest.mark.parametrize(("text", "message"), [
    ("prio-pfc 0:maybe 1:off\n", "expected on or off, got 'maybe'"),
    ("tc-tsa 0:fair\n", "unknown transmission selection algorithm 'fair'"),
    ("tc-bw 0:130\n", "bandwidth share '130' is not a number from 0 to 100"),
    ("prio-tc 9:0\n", "priority or traffic class '9' is not a number from 0 to 7"),
    ("dscp-prio 64:1\n", "DSCP '64' is not a number from 0 to 63"),
    ("dscp-prio XX9:1\n", "DSCP 'XX9' is not a number from 0 to 63"),
    ("pfc-cap\n", "'pfc-cap' without its value"),
])
def test_a_bad_value_puts_its_line_aside(text: str, message: str) -> None:
    report = parse_dcb("prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0\n" + text)
    assert [(u.line, u.reason) for u in report.unplaced] == [(2, message)]
    assert report.prio_tc == dict.fromkeys(range(8), 0)


@pytest.mark.parametrize("text", [
    "", "Attribute read: Operation not supported\n", "Object \"app\" is unknown, try \"dcb help\".\n",
    "dcb pfc show dev eth1\n", "DCBX mode: OS controlled\nPriority trust state: dscp\n",
])
def test_text_without_a_dcb_row_is_an_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_dcb(text)


def test_a_pasted_command_line_is_skipped_not_a_row() -> None:
    report = parse_dcb("dcb pfc show dev eth1\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n")
    assert report.unplaced == [] and report.other == {}
    # Another tool's command without a prompt is not dcb's: it stays unplaced.
    other = parse_dcb("mlnx_qos -i eth1\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n")
    assert [u.line for u in other.unplaced] == [1] and other.other == {}


def test_the_mlnx_qos_facts_of_a_report() -> None:
    qos = qos_of(parse_dcb(read("dcb-pfc-1.txt") + read("dcb-ets-1.txt") + read("dcb-app-1.txt")))
    assert (qos.trust, qos.dscp2prio, qos.pfc_enabled, qos.cable_len) == ("dscp", {0: 0, 24: 3, 48: 6}, [], 0)
    assert [(tc.tc, tc.tsa, tc.bw, tc.priorities) for tc in qos.tcs[:4]] == [
        (0, "ets", 33, [0]), (1, "ets", 33, [1]), (2, "ets", 34, [2]), (3, "strict", None, [3])]
    no_app = qos_of(parse_dcb(read("dcb-pfc-1.txt") + read("dcb-ets-1.txt")))
    assert (no_app.trust, no_app.dscp2prio) == ("pcp", {})
    with pytest.raises(ParseError, match="no tc-tsa, tc-bw, prio-tc in the dcb output"):
        qos_of(parse_dcb(read("dcb-pfc-1.txt")))


def _render(pfc: list[bool], tsa: list[str], bw: list[int], prio_tc: list[int], dscp: dict[int, int],
            names: bool) -> str:
    """The three reports as iproute2 prints them (an item and a space each), with or without -N."""
    by_value = {value: name for name, value in DSCP_NAMES.items() if name.isupper() and name != "CS0"}
    app = "".join(f"{by_value.get(d, d) if names else d}:{p} " for d, p in sorted(dscp.items()))
    return ((f"dscp-prio {app}\n" if dscp else "")
            + "prio-pfc " + "".join(f"{i}:{'on' if on else 'off'} " for i, on in enumerate(pfc)) + "\n"
            + "tc-tsa " + "".join(f"{i}:{t} " for i, t in enumerate(tsa)) + "\n"
            + "tc-bw " + "".join(f"{i}:{b} " for i, b in enumerate(bw)) + "\n"
            + "prio-tc " + "".join(f"{i}:{t} " for i, t in enumerate(prio_tc)) + "\n")


EIGHT = {"min_size": 8, "max_size": 8}


@given(st.lists(st.booleans(), **EIGHT), st.lists(st.sampled_from(TSA_NAMES), **EIGHT),
       st.lists(st.integers(0, 100), **EIGHT), st.lists(st.integers(0, 7), **EIGHT),
       st.dictionaries(st.integers(0, 63), st.integers(0, 7)), st.booleans())
def test_any_state_reads_back(pfc: list[bool], tsa: list[str], bw: list[int], prio_tc: list[int],
                              dscp: dict[int, int], names: bool) -> None:
    qos = qos_of(parse_dcb(_render(pfc, tsa, bw, prio_tc, dscp, names)))
    assert qos.trust == ("dscp" if dscp else "pcp")
    assert qos.dscp2prio == dscp
    assert qos.pfc_enabled == [i for i, on in enumerate(pfc) if on]
    assert [(tc.tsa, tc.bw) for tc in qos.tcs] == [(t, b if t == "ets" else None) for t, b in zip(tsa, bw, strict=True)]
    assert [p for tc in qos.tcs for p in tc.priorities] == sorted(range(8), key=lambda p: (prio_tc[p], p))
