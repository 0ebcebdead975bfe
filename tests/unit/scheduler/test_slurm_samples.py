"""Real sinfo outputs (tests/samples/slurm, sources in tests/samples/INDEX.md) read by fabnet's parsers.

fabnet asks `sinfo -N -h -o '%N|%T|%u|%E'`; no public cluster's answer in that exact format was found, so
these are `sinfo --Node --long` tables, whose STATE column is the same %T word and whose REASON column is
%E cut to 20 characters. Their columns are taken by the table's own header, then read as fabnet reads its
own records. The partition summary's NODELIST and NODES columns check hostlist expansion: NODES is the
count Slurm itself gives for each list. The `sinfo-fabnet-*` samples are fabnet's own records, recorded on
the lab's Slurm 22.05 with reasons an admin or a health check may set."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provisioner.run import transport
from provisioner.scheduler.hostlist import expand
from provisioner.scheduler.slurm import Slurm, parse_sinfo

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "slurm"


def long_node_rows(text: str) -> list[tuple[str, str, str, str]]:
    """(node, partition, %T word, reason) of each row under a `sinfo --Node --long` header."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NODELIST"))
    header = lines[start].split()
    rows = []
    for line in lines[start + 1:]:
        fields = line.split(None, len(header) - 1)
        rows.append((fields[0], fields[header.index("PARTITION")], fields[header.index("STATE")],
                     fields[-1].rstrip()))
    return rows


# sample, node, what an admin reads: state, flag, responding, drained, out of service, reason
LONG = [
    ("sinfo-Nl-1-drained-low-realmemory.txt", "ip-172-31-79-91",
     ("drained", "", True, True, True, "Low RealMemory")),
    ("sinfo-lNe-2-down-not-responding-cut.txt", "compute003",
     ("down", "*", False, False, True, "Not responding")),
    ("sinfo-Nl-3-unknown-two-partitions.txt", "c1", ("idle", "", True, False, False, "")),
    ("sinfo-Nl-3-unknown-two-partitions.txt", "c3", ("unknown", "*", False, False, True, "")),  # never registered
]


@pytest.mark.parametrize(("sample", "node", "expected"), LONG)
def test_long_node_tables(sample: str, node: str, expected: tuple[str, str, bool, bool, bool, str]) -> None:
    rows = long_node_rows((SAMPLES / sample).read_text())
    records = "".join(f"{name}|{word}|Unknown|{reason}\n" for name, _, word, reason in rows)
    state = parse_sinfo(records, [name for name, *_ in rows])[node]
    assert (state.state, state.flag, state.responding, state.drained, state.out_of_service,
            state.reason) == expected
    assert not state.drained_by_fabnet and state.reason_user == ""


def test_every_row_of_every_long_table_is_read() -> None:
    for sample in sorted(SAMPLES.glob("sinfo-*N*.txt")):
        rows = long_node_rows(sample.read_text())
        records = "".join(f"{name}|{word}|Unknown|{reason}\n" for name, _, word, reason in rows)
        assert set(parse_sinfo(records, [row[0] for row in rows])) == {row[0] for row in rows}, sample.name


def test_each_partition_rows_node_count_is_its_hostlists_length() -> None:
    """Commas inside brackets, leading zeros, several bracket groups in one list."""
    lines = (SAMPLES / "sinfo-4-partitions-drng-at-hostlists.txt").read_text().splitlines()[1:]
    for line in lines:
        _, _, _, count, _, nodelist = line.split()
        assert len(expand(nodelist)) == int(count), line
    assert expand("d[001-032],f[001-004,006-024]")[31:34] == ["d032", "f001", "f002"]
    assert "f005" not in expand("d[001-032],f[001-004,006-024]")
    assert expand("c[002,004,008-010,012,016,024-028]")[:4] == ["c002", "c004", "c008", "c009"]


class Recorded:
    """A controller that answers Slurm.state's exec with a recorded answer, the recording's mark replaced by
    the one this call chose."""

    MARK = "fabnet-0123456789ab|"

    def __init__(self, sample: str) -> None:
        self.text = (SAMPLES / sample).read_bytes().decode("utf-8")

    def exec(self, script: str, *, timeout: float | None = None) -> transport.ExecResult:
        mark = re.search(r"fabnet-[0-9a-f]{12}\|", script)
        assert mark is not None
        return transport.ExecResult(self.text.replace(self.MARK, mark.group()), "", 0, 0.0)


# Recorded on Slurm 22.05.8 (Debian's slurm-wlm) from Slurm.state's own exec, after
# `scontrol update nodename=gpu01 state=drain reason=...` with the reasons below; `sinfo --json` on the
# same controller gave the same reasons.
REASON_1 = ("disk a|b=c x=1\nfabnet: smoke: slow\ngpu01|idle|Unknown|none\n"
            "non-ASCII: h\N{LATIN SMALL LETTER E WITH ACUTE}llo \N{EM DASH} \N{CHECK MARK}")
RECORDED = [
    ("sinfo-fabnet-1-22.05-reason-lines-blanks-utf8.txt",
     {"gpu01": ("  fabnet: audit: drifted: mtu  ", "root", False), "gpu02": (REASON_1, "root", False)}),
    ("sinfo-fabnet-2-22.05-reason-none-by-root-tab-trailing-breaks.txt",
     {"gpu01": ("none", "root", False), "gpu02": ("tab\there = 1\n\n", "root", False)}),
]


@pytest.mark.parametrize(("sample", "expected"), RECORDED)
def test_reasons_slurm_printed_are_read_whole(sample: str, expected: dict[str, tuple[str, str, bool]]) -> None:
    """Line breaks, `|`, `=`, blanks around the reason, a tab and UTF-8 are the reason's own: read whole, no
    later line read as a record (gpu02's third line is shaped like one of gpu01), a reason that starts with a
    blank before `fabnet:` not fabnet's, and `none` set by root a reason."""
    states = Slurm(Recorded(sample)).state(["gpu01", "gpu02"])
    assert {name: (s.reason, s.reason_user, s.drained_by_fabnet) for name, s in states.items()} == expected
    assert all(s.state == "drained" and s.drain and s.out_of_service for s in states.values())


def test_a_reason_ending_the_answer_keeps_its_own_line_breaks() -> None:
    mark = Recorded.MARK
    text = f"{mark}gpu01|drained|root|a\n\nb\n\n\n"  # reason "a\n\nb\n\n", then sinfo's own line break
    assert parse_sinfo(text, ["gpu01"], mark)["gpu01"].reason == "a\n\nb\n\n"
    assert parse_sinfo(f"noise\n{text}", ["gpu01"], mark)["gpu01"].reason == "a\n\nb\n\n"
