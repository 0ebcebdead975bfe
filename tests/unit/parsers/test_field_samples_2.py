"""Values read from the real outputs of the second pass (perfquery, ibdev2netdev, ofed_info, nccl-tests,
dcb, ibstatus, rdma link), and how each reads when the output stops inside a line."""

from __future__ import annotations

import pytest

from provisioner.parsers import parse
from provisioner.parsers.ofed_info import parse_ofed_info
from provisioner.parsers.versions import matches

from ._samples import read


def _lines(name: str) -> list[str]:
    return read(name).splitlines(keepends=True)


# ------------------------------------------------------------------------------------------- perfquery

def test_perfquery_root_prompt_is_not_a_port_and_every_counter_is_read() -> None:
    facts = parse("perfquery", read("perfquery-x-3-prompt.txt"))
    assert facts["complete"] is True
    assert facts["unplaced"] == []  # root's `# perfquery -x 10 1` is the command, not a port header
    (port,) = facts["ports"]
    assert (port["lid"], port["port"]) == (10, 1)
    assert len(port["counters"]) == 22 and set(port["counters"].values()) == {0}
    assert port["counters"]["port_xmit_data"] == 0 and "qp1_dropped" in port["counters"]


@pytest.mark.parametrize("tail", ["# Port extended counters:", "# Port extended counters: Lid 1719",
                                  "# Port", "PortXmitData:......", "PortXmitDa"])
def test_perfquery_cut_inside_its_last_line_is_incomplete(tail: str) -> None:
    text = "".join(_lines("perfquery-x-1.txt")[:26]) + tail
    facts = parse("perfquery", text)
    assert facts["complete"] is False
    assert len(facts["ports"]) == 1 and facts["ports"][0]["counters"]["port_xmit_wait"] == 22730501


def test_perfquery_second_port_with_fewer_counters_is_incomplete() -> None:
    lines = _lines("perfquery-x-1.txt")
    for keep in range(29, len(lines)):
        facts = parse("perfquery", "".join(lines[:keep]))
        assert facts["complete"] is False, keep
    assert parse("perfquery", read("perfquery-x-1.txt"))["complete"] is True


# ---------------------------------------------------------------------------------------- ibdev2netdev

def test_ibdev2netdev_link_cut_before_its_state_is_incomplete() -> None:
    lines = _lines("ibdev2netdev-4.txt")
    cut = lines[-1].rstrip("\r\n")
    for tail in (cut[: cut.index(" (")], cut[: cut.index("(") + 2], cut[: cut.index("==>") + 3]):
        facts = parse("ibdev2netdev", "".join(lines[:-1]) + tail)
        assert facts["complete"] is False, tail
        assert len(facts["links"]) >= len(lines) - 1


def test_ibdev2netdev_every_sample_line_prints_its_state() -> None:
    for name in ("ibdev2netdev-1.txt", "ibdev2netdev-3.txt", "ibdev2netdev-4.txt", "ibdev2netdev-6-pod.txt"):
        facts = parse("ibdev2netdev", read(name))
        assert facts["complete"] is True, name
        assert all(link["state"] in ("Up", "Down") for link in facts["links"]), name


def test_ibdev2netdev_old_style_prints_no_state_and_is_complete() -> None:
    # The script's branch for kernels without /sys/class/net/*/dev_id: `print_line` has no state.
    facts = parse("ibdev2netdev", "mlx4_0 port 1 <===> eth2\nmlx4_0 port 2 <===> ib0\n")
    assert facts["complete"] is True
    assert [(x["device"], x["port"], x["netdev"], x["state"]) for x in facts["links"]] == [
        ("mlx4_0", 1, "eth2", None), ("mlx4_0", 2, "ib0", None)]


def test_ibdev2netdev_verbose_port_state_is_padded_by_the_script() -> None:
    # print_verbose_info pads the IB state with printf "%-6s": `(DOWN  )`.
    line = ("0000:3b:00.0 mlx5_0 (MT4119 - MCX516A) CX516A - ConnectX-5 fw 16.28.2006 port 1 (DOWN  ) "
            "==> ens1f0 (Down)\n")
    (link,) = parse("ibdev2netdev", line)["links"]
    assert (link["port_state"], link["state"], link["fw"]) == ("DOWN", "Down", "16.28.2006")


# ------------------------------------------------------------------------------------------- ofed_info

@pytest.mark.parametrize(("text", "driver", "ok"), [
    ("OFED-internal-24.07-0.3.5.0.110:", "24.07-0.3.5.0.110", True),
    ("MLNX_OFED_LINUX-24.10-1.1.4.0:", "24.10-1.1.4.0", True),
    ("MLNX_OFED_LINUX-23.07-0.5.1.2:", "23.07-0.5.1.2", False),
    ("doca-host 2.9.1-012000-24.10-ubuntu2204", "24.10", True),
    ("doca-ofed-3.1.0-25.07-0.9.7.0", "25.07-0.9.7.0", True),
])
def test_driver_version_compares_with_the_playbooks_constraint(text: str, driver: str, ok: bool) -> None:
    info = parse_ofed_info(text + "\n")
    assert info.driver_version == driver
    assert matches(info.driver_version, ">=23.10") is ok


def test_doca_release_alone_names_no_driver_version() -> None:
    info = parse_ofed_info("DOCA-HOST-2.9.1\n")
    assert (info.flavor, info.version, info.driver_version) == ("DOCA", "2.9.1", None)


def test_internal_sample_reads_as_a_24_07_driver() -> None:
    info = parse_ofed_info(read("ofed_info-s-8-internal-24.07.txt"))
    assert (info.flavor, info.driver_version, info.complete) == ("OFED-internal", "24.07-0.3.5.0.110", True)


# ------------------------------------------------------------------------------------------- nccl-tests

def test_nccl_tests_2019_rows_without_a_reduction_column() -> None:
    facts = parse("nccl_tests", read("all_reduce_perf-10-old-error-column.txt"))
    assert len(facts["rows"]) == 12 and facts["unplaced"] == []
    first, last = facts["rows"][0], facts["rows"][-1]
    assert (first["size"], first["count"], first["type"], first["redop"]) == (65536, 8192, "float", None)
    assert (last["oop_busbw"], last["ip_busbw"], last["ip_wrong"]) == (20.34, 21.86, 0.0)
    assert facts["avg_busbw"] == 6.6972
    # An excerpt without its column header is never complete.
    assert facts["complete"] is False and facts["missing"] == ["column header (#  size  count  type ...)"]


def test_nccl_tests_2017_header_bytes_n_op_res() -> None:
    # The header nccl-tests printed from 2017 to 2019 (src/all_reduce.cu print_header).
    text = ("#                                           out-of-place                    in-place\n"
            "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw"
            "      res\n"
            "     1048576        262144   float     sum    47.38   11.06   11.06  0e+00"
            "    46.84   11.19   11.19  0e+00\n"
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 11.1\n")
    facts = parse("nccl_tests", text)
    assert facts["complete"] is True and facts["verdict"] == "ok"
    assert facts["columns"][:4] == ["size", "count", "type", "redop"] and facts["wrong_column"] == "res"
    assert facts["rows"][0]["redop"] == "sum" and facts["rows"][0]["ip_algbw"] == 11.19
    cut = parse("nccl_tests", text.replace("# Avg bus bandwidth    : 11.1\n", ""))
    assert cut["complete"] is False and cut["verdict"] == "truncated: no footer"


def test_nccl_tests_ending_at_collective_concluded_without_footer_is_incomplete() -> None:
    lines = _lines("all_gather_perf-9-two-runs.txt")
    text = "".join(lines[10:28]) + "# Collective test concluded: all_gather_perf_mpi\n"
    facts = parse("nccl_tests", text)
    assert facts["complete"] is False and facts["verdict"] == "truncated: no footer"
    assert len(facts["rows"]) == 8
