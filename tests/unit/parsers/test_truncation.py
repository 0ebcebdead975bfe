"""Output cut at any line: the part printed parses to a prefix of the whole, marked incomplete where the
tool's structure shows the cut, and only output with nothing recognisable is an error."""

from __future__ import annotations

import pytest

from provisioner.errors import ParseError
from provisioner.parsers import parse

from ._samples import SAMPLE_KINDS, read

# The list of records each kind returns, in output order: a cut keeps a prefix of it.
RECORDS = {
    "nccl_tests": "rows", "ibdev2netdev": "links", "rdma_link": "links", "show_gids": "gids",
    "ibstat": "cas", "ibv_devinfo": "devices", "nccl_debug": "warnings",
}


def _cuts(name: str) -> list[tuple[int, str]]:
    lines = read(name).splitlines(keepends=True)
    return [(keep, "".join(lines[:keep])) for keep in range(1, len(lines))]


def _has_content(text: str) -> bool:
    return any(line.strip() for line in text.splitlines())


@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_every_cut_is_a_prefix_of_the_whole(name: str, kind: str) -> None:
    whole = parse(kind, read(name))
    field = RECORDS.get(kind)
    for keep, text in _cuts(name):
        try:
            part = parse(kind, text)
        except ParseError as err:
            # Allowed only where what was kept holds no line the parser could recognise.
            assert err.line is None or err.line <= keep
            continue
        assert all(u["line"] <= keep for u in part["unplaced"])
        if field:
            records = part[field]
            # Every record but the last is whole; the last may have been cut inside.
            assert records[:-1] == whole[field][: max(len(records) - 1, 0)], (name, keep)


@pytest.mark.parametrize("name", sorted(n for n, k in SAMPLE_KINDS.items() if k == "nccl_tests"))
def test_nccl_tests_cut_before_the_footer_is_incomplete(name: str) -> None:
    lines = read(name).splitlines(keepends=True)
    footers = [i for i, line in enumerate(lines) if "Avg bus bandwidth" in line]
    tables = [i for i, line in enumerate(lines) if line.lstrip("#").split()[:2] == ["size", "count"]]
    if not footers:
        assert parse("nccl_tests", read(name))["complete"] is False  # the sample itself is an excerpt
        return
    # A cut between a run's header (or its first line, when the excerpt has no header) and its footer.
    starts = tables or [0]
    spans = [(start, min(f for f in footers if f > start)) for start in starts if any(f > start for f in footers)]
    for keep, text in _cuts(name):
        if any(start < keep <= footer for start, footer in spans) and _has_content(text):
            part = parse("nccl_tests", text)
            assert part["complete"] is False, keep
            assert part["verdict"] == "truncated: no footer"


@pytest.mark.parametrize("name", sorted(n for n, k in SAMPLE_KINDS.items() if k == "nvidia_smi_topo"))
def test_topology_cut_inside_the_matrix_is_incomplete(name: str) -> None:
    whole = parse("nvidia_smi_topo", read(name))
    if not whole["matrix"]:
        pytest.skip("legend-only sample")
    lines = read(name).splitlines(keepends=True)
    header = min(i for i, line in enumerate(lines) if "GPU0" in line.split())  # after any echoed command
    # The first such row: another view pasted after the legend (`topo -p2p`) has rows of the same names.
    last_row = min(i for i, line in enumerate(lines)
                   if i >= header and line.split()[:1] == [list(whole["matrix"])[-1]])
    for keep, text in _cuts(name):
        if header < keep <= last_row:
            part = parse("nvidia_smi_topo", text)
            assert part["complete"] is False
            assert part["missing"][0].startswith("rows for ")
            assert all(whole["matrix"][row] == cells for row, cells in part["matrix"].items())


@pytest.mark.parametrize("name", ["ibv_devinfo-1.txt", "ibv_devinfo-2.txt", "ibv_devinfo-v-1.txt"])
def test_ibv_devinfo_cut_after_a_port_line_is_incomplete(name: str) -> None:
    lines = read(name).splitlines(keepends=True)
    for keep, text in _cuts(name):
        if lines[keep - 1].strip().startswith("port:"):
            part = parse("ibv_devinfo", text)
            assert part["complete"] is False
            assert "has no state line" in part["missing"][-1]


def test_text_that_is_not_the_tool_is_an_error_naming_the_line() -> None:
    for kind in ("nccl_tests", "nvidia_smi_topo", "mlnx_qos", "ibv_devinfo", "show_gids", "ofed_info"):
        with pytest.raises(ParseError) as err:
            parse(kind, "\nHello, this is a README\nnothing to see\n")
        assert err.value.line == 2, kind
