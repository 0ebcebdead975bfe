"""iproute2 `dcb` forms beyond app/pfc/ets text: the man-page outputs of every object, `dcb -j` JSON,
and output cut inside its last line or object, which is incomplete and never a wrong complete report."""

from __future__ import annotations

import json

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.dcb import parse_dcb, qos_of

from ._samples import read, samples_of


def test_pfc_with_a_delay_and_two_lossless_priorities() -> None:
    report = parse_dcb(read("dcb-pfc-5-man.txt"))
    assert (report.pfc_cap, report.macsec_bypass, report.delay) == (8, False, 4096)
    assert [p for p, on in report.prio_pfc.items() if on] == [6, 7]
    assert report.complete


def test_buffer_maxrate_pcp_and_rewrite_rows_are_kept_as_text() -> None:
    assert parse_dcb(read("dcb-buffer-6-man.txt")).other == {
        "prio-buffer": "0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7",
        "buffer-size": "0:10Kb 1:10Kb 2:10Kb 3:10Kb 4:10Kb 5:10Kb 6:1Mb 7:10Kb", "total-size": "1222Kb"}
    assert parse_dcb(read("dcb-maxrate-12-man.txt")).other["tc-maxrate"].split()[6] == "6:100Gbit"
    assert parse_dcb(read("dcb-app-10-pcp-man.txt")).other == {"pcp-prio": "1nd:1 2de:2"}
    rewr = parse_dcb(read("dcb-rewr-11-man.txt"))
    assert (rewr.other, rewr.dscp_prio) == ({"prio-dscp": "0:0 3:CS3 3:25 6:CS6"}, [])


def test_dcbx_flags_and_the_apptrust_order() -> None:
    assert parse_dcb(read("dcb-dcbx-7-man.txt")).dcbx == ["host", "ieee"]
    order = parse_dcb(read("dcb-apptrust-8-man.txt"))
    assert (order.apptrust_order, order.complete, order.unplaced) == (["port", "pcp", "ethtype"], True, [])


def test_numeric_app_table() -> None:
    assert parse_dcb(read("dcb-app-9-numeric-man.txt")).dscp_prio == [(0, 0), (24, 2), (24, 3), (48, 6)]


# `dcb -j` as iproute2 prints it: one object a command; app pairs carry a " " string since 6.5.
JSON = (
    '{"dscp_prio":[[26,3," "],[48,6," "]]}\n'
    '{"prio_pfc":[false,false,false,true,false,false,false,false]}\n'
    '{"tc_tsa":["ets","ets","strict","strict","strict","strict","strict","strict"],'
    '"tc_bw":[50,50,0,0,0,0,0,0],"prio_tc":[0,0,0,1,2,3,4,5]}\n'
)


def test_json_reads_as_the_text_form() -> None:
    report = parse_dcb(JSON)
    qos = qos_of(report)
    assert (qos.trust, qos.dscp2prio, qos.pfc_enabled) == ("dscp", {26: 3, 48: 6}, [3])
    assert [(tc.tsa, tc.bw, tc.priorities) for tc in qos.tcs[:2]] == [("ets", 50, [0, 1, 2]), ("ets", 50, [3])]
    assert (report.complete, report.unplaced) == (True, [])
    old = parse_dcb('{"dscp_prio":[[24,3]]}\n')  # before 6.5: plain pairs
    assert old.dscp_prio == [(24, 3)]


def test_pretty_json_and_flags() -> None:
    text = json.dumps({"host": True, "lld_managed": False, "ieee": True}, indent=4) + "\n" + json.dumps(
        {"pfc_cap": 8, "macsec_bypass": False, "delay": 0, "prio_pfc": [True] * 8}, indent=4)
    report = parse_dcb(text)
    assert (report.dcbx, report.pfc_cap, report.prio_pfc) == (["host", "ieee"], 8, dict.fromkeys(range(8), True))


def test_json_with_a_bad_value_names_its_line() -> None:
    report = parse_dcb('{"prio_pfc":[false,false,false,false,false,false,false,false]}\n{"tc_bw":[130]}\n')
    assert [(u.line, u.reason) for u in report.unplaced] == [(2, "bandwidth share '130' is not a number from 0 to 100")]


def test_every_cut_of_the_json_is_incomplete_or_an_error() -> None:
    for end in range(1, len(JSON) - 1):
        text = JSON[:end]
        if text.endswith("}\n") or text.endswith("}"):
            continue
        try:
            report = parse_dcb(text)
        except ParseError:
            continue
        assert report.complete is False, text


KEYWORDS = ("pfc-cap", "macsec-bypass", "delay", "prio-pfc", "prio-tc", "tc-tsa", "tc-bw", "dscp-prio")
PARTIAL = ("", "o", "of", "e", "et", "s", "st", "str", "stri", "stric")


def _char_cuts(name: str) -> list[str]:
    """The sample cut inside its words: at every character that is not a blank or a line end."""
    text = read(name)
    return [text[:end] for end in range(1, len(text)) if not text[end - 1].isspace() and not text[end].isspace()]


@pytest.mark.parametrize("name", samples_of("dcb"))
def test_a_cut_inside_a_word_is_never_complete_and_empty(name: str) -> None:
    for text in _char_cuts(name):
        try:
            report = parse_dcb(text)
        except ParseError:
            continue  # nothing whole was printed yet
        values = report.model_dump(exclude={"complete", "missing", "unplaced"})
        assert report.complete is False or any(v not in (None, [], {}) for v in values.values()), (name, text)
        last = text.split()[-1]
        key, _, value = last.partition(":")
        in_order = text.splitlines()[-1].split()[0] == "order:"  # its words are values, not keywords
        cut_keyword = not in_order and any(k.startswith(last) and k != last for k in KEYWORDS)
        if cut_keyword or (key.isdigit() and ":" in last and value in PARTIAL):
            # a keyword, or an on/off or algorithm cut before it reads as one: the cut shows
            assert report.complete is False, (name, text)


@pytest.mark.parametrize("name", samples_of("dcb"))
def test_a_cut_at_a_line_end_keeps_a_prefix(name: str) -> None:
    whole = parse_dcb(read(name)).model_dump()
    lines = read(name).splitlines(keepends=True)
    for keep in range(1, len(lines)):
        part = parse_dcb("".join(lines[:keep])).model_dump()
        for key in ("pfc_cap", "delay", "dscp_prio", "dcbx", "apptrust_order"):
            assert part[key] in (whole[key], None, []), (name, keep, key)


def test_a_bad_value_at_the_end_of_a_line_that_is_not_last_stays_complete() -> None:
    report = parse_dcb("prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:9\n"
                       "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n")
    assert report.complete and [u.line for u in report.unplaced] == [1]
