"""What operators paste is rarely the bare tool output: each class of decoration parses to the same facts.

Each test takes a real sample and applies what a terminal, launcher, logger or person adds to it, the way
that program does it (srun --label pads the task id; Open MPI's --tag-output writes `[job,rank]<stdout>:`;
`column -t` re-aligns on any blank), then compares with the bare sample's facts.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from provisioner.errors import ParseError
from provisioner.parsers import COMMANDS, parse
from provisioner.parsers.nccl_debug import parse_nccl_debug
from provisioner.parsers.nccl_tests import parse_nccl_tests, version_from_code
from provisioner.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from provisioner.parsers.rdma_link import parse_rdma_link

from ._samples import SAMPLE_KINDS, read


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n").split("\n")


def srun_label(text: str, task: int = 3, width: int = 2) -> str:
    return "".join(f"{task:>{width}}: {line}\n" for line in _lines(text))


def mpi_tag(text: str) -> str:
    return "".join(f"[1,7]<stdout>:{line}\n" for line in _lines(text))


def rank_tag(text: str) -> str:
    return "".join(f"[12] {line}\n" for line in _lines(text))


def timestamps(text: str) -> str:
    return "".join(f"[2026-01-02 03:04:{i % 60:02d}] {line}\n" for i, line in enumerate(_lines(text)))


def iso_timestamps(text: str) -> str:
    return "".join(f"2026-01-02T03:04:05.123456Z {line}\n" for line in _lines(text))


def host_label(text: str) -> str:
    return "".join(f"gpu07: {line}\n" for line in _lines(text))


def ansi_wrapped(text: str) -> str:
    # nvidia-smi underlines its header and resets at the end; some terminals colour every line.
    lines = _lines(text)
    return "".join(f"\x1b[4m{line}\x1b[0m\n" if i == 0 else f"{line}\x1b[0m\n" for i, line in enumerate(lines))


def ci_clock(text: str) -> str:
    # A CI console's timestamper: the time of day alone before every line.
    return "".join(f"19:34:{i % 60:02d} {line}\n" for i, line in enumerate(_lines(text)))


def ray_worker(text: str) -> str:
    # Ray's driver prints each worker's lines behind its name, pid and node (a blank line keeps the prefix).
    return "".join(f"(RayWorkerWrapper pid=92234, ip=10.0.0.7) {line}\n" for line in _lines(text))


def label_and_timestamp(text: str) -> str:
    return srun_label(timestamps(text), task=0)


DECORATIONS = {
    "srun-label": srun_label,
    "srun-label-wide": lambda t: srun_label(t, task=117, width=3),
    "mpirun-tag-output": mpi_tag,
    "rank-tag": rank_tag,
    "timestamp": timestamps,
    "iso-timestamp": iso_timestamps,
    "pdsh-host": host_label,
    "ansi": ansi_wrapped,
    "label-and-timestamp": label_and_timestamp,
    "ray-worker": ray_worker,
    "ci-clock": ci_clock,
}


def _facts(kind: str, text: str) -> dict:
    facts = parse(kind, text)
    # Line numbers and texts of unplaced lines are about the decorated copy; the facts must agree.
    facts.pop("unplaced")
    for records in ("completion_errors", "communicators", "suspect_interfaces"):
        for record in facts.get(records, []):
            record.pop("line")
    return facts


# The host a decoration names: an NCCL log line whose own prefix names none takes it, as explain does.
_NAMES_A_HOST = {"pdsh-host": "gpu07", "ray-worker": "10.0.0.7"}


def _unnamed(facts: dict, host: str) -> dict:
    """`facts` as if nothing had named `host`: the facts a bare line without a host of its own gives."""
    facts = {**facts, "hosts": [h for h in facts["hosts"] if h != host],
             "nccl_versions_by_host": {h: v for h, v in facts["nccl_versions_by_host"].items() if h != host}}
    for records in ("completion_errors", "call_failures", "async_events", "communicators", "suspect_interfaces"):
        facts[records] = [{**r, "host": None if r.get("host") == host else r.get("host")} for r in facts[records]]
    return facts


_ALREADY_DECORATED = {"all_reduce_perf-13-mpi-tag-cut.txt"}  # `[1,0]<stdout>:` on every line as recorded


@pytest.mark.parametrize("decoration", sorted(DECORATIONS))
@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_decorated_sample_parses_to_the_same_facts(name: str, kind: str, decoration: str) -> None:
    text = read(name)
    if decoration in ("pdsh-host", "ci-clock") and len(_lines(text)) < 2:
        pytest.skip("one line alone cannot tell a host label from a key")
    if name in _ALREADY_DECORATED:
        pytest.skip("the sample carries a launcher prefix already: a second one is another case")
    decorated = _facts(kind, DECORATIONS[decoration](text))
    if kind == "nccl_debug" and decoration in _NAMES_A_HOST:
        decorated = _unnamed(decorated, _NAMES_A_HOST[decoration])
    assert decorated == _facts(kind, text)


def test_a_decoration_names_the_host_of_nccl_lines_without_their_own() -> None:
    text = read("nccl-debug-net-lines-1.txt")  # `NCCL INFO NET/...` lines without NCCL's prefix
    assert parse_nccl_debug(text).hosts == []
    for decoration, host in _NAMES_A_HOST.items():
        assert parse_nccl_debug(DECORATIONS[decoration](text)).hosts == [host]


# How a tool's own command line reaches a paste: behind a prompt, root's bare `#`, no prompt at all, or run
# with sudo, by its path, with its arguments and a pipe.
PASTED_COMMANDS = {
    "dollar": "$ {name} -a 1",
    "root": "# {name}",
    "bare": "{name}",
    "sudo-path-pipe": "sudo /usr/bin/{name} -x | grep y",
}


def _without_skip_note(facts: dict) -> dict:
    # ibstat notes every shell line it skipped in `errors`: the one note a skipped command line adds.
    if facts.get("errors", [""])[0].startswith("line 1: shell prompt line skipped: "):
        facts["errors"] = facts["errors"][1:]
    return facts


@pytest.mark.parametrize("form", sorted(PASTED_COMMANDS))
@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_own_command_line_before_a_sample_is_skipped(name: str, kind: str, form: str) -> None:
    # A blank first line keeps the line numbers of both texts the same: the results must be equal.
    text = read(name)
    command = PASTED_COMMANDS[form].format(name=COMMANDS[kind][0])
    assert _without_skip_note(parse(kind, f"{command}\n{text}")) == parse(kind, f"\n{text}")


@pytest.mark.parametrize("kind", sorted(COMMANDS))
def test_every_command_of_a_kind_is_skipped(kind: str) -> None:
    text = read(next(name for name, k in sorted(SAMPLE_KINDS.items()) if k == kind))
    for command in COMMANDS[kind]:
        assert _without_skip_note(parse(kind, f"{command} -v\n{text}")) == parse(kind, f"\n{text}"), command


@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_another_tools_command_line_is_still_reported(name: str, kind: str) -> None:
    # Not this tool's output, so not for this parser to drop: unplaced, or the error when nothing else is
    # output of the kind (traffic_class's empty value).
    other = next(c for k in sorted(COMMANDS) for c in COMMANDS[k] if c not in COMMANDS[kind])
    try:
        facts = parse(kind, f"{other} -v\n{read(name)}")
    except ParseError as err:
        assert (err.line, err.text) == (1, f"{other} -v")
        return
    assert [u["text"] for u in facts["unplaced"] if u["line"] == 1] == [f"{other} -v"]


def column_t(text: str) -> str:
    """What `column -t` prints: cells split on any blank, each column padded to its widest cell + 2."""
    rows = [line.split() for line in _lines(text)]
    widths: dict[int, int] = {}
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths.get(i, 0), len(cell))
    return "".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() + "\n" for row in rows)


@pytest.mark.parametrize("name", ["nvidia-smi-topo-1.txt", "nvidia-smi-topo-3.txt", "nvidia-smi-topo-4.txt"])
def test_topology_re_spaced_by_column_t(name: str) -> None:
    original = parse_nvidia_smi_topo(read(name))
    respaced = parse_nvidia_smi_topo(column_t(read(name)))
    assert respaced.info_columns == original.info_columns  # `CPU Affinity` is one column again
    assert respaced.model_dump(exclude={"unplaced"}) == original.model_dump(exclude={"unplaced"})


@pytest.mark.skipif(shutil.which("column") is None, reason="util-linux column is not installed")
def test_column_t_model_matches_the_real_tool() -> None:
    text = read("nvidia-smi-topo-4.txt")
    real = subprocess.run(["column", "-t"], input=text, capture_output=True, text=True, check=True).stdout
    parsed = parse_nvidia_smi_topo(real)
    assert parsed.unplaced == []  # `NIC      Legend:` too
    assert parsed.model_dump() == parse_nvidia_smi_topo(column_t(text)).model_dump()


@pytest.mark.parametrize(("name", "kind"), [
    ("nvidia-smi-topo-4.txt", "nvidia_smi_topo"), ("all_reduce_perf-4.txt", "nccl_tests"),
    ("ibstat-3.txt", "ibstat"), ("mlnx_qos-1.txt", "mlnx_qos"), ("show_gids-1.txt", "show_gids"),
])
def test_trailing_comments_by_people_are_ignored(name: str, kind: str) -> None:
    lines = _lines(read(name))
    annotated = "".join(f"{line}   # checked {i}\n" if line.strip() and not line.lstrip().startswith("#") else
                        f"{line}\n" for i, line in enumerate(lines))
    assert _facts(kind, annotated) == _facts(kind, read(name))


def test_nvidia_smi_header_escapes_written_into_a_file() -> None:
    # What `nvidia-smi topo -m > topo.txt` leaves: the header between underline-on and reset.
    lines = _lines(read("nvidia-smi-topo-1.txt"))
    text = "\x1b[4m" + lines[0] + "\x1b[0m\n" + "".join(f"{line}\n" for line in lines[1:])
    topo = parse_nvidia_smi_topo(text)
    assert topo.columns[0] == "GPU0" and topo.info_columns == ["CPU Affinity", "NUMA Affinity"]
    assert topo.unplaced == [] and topo.complete


def test_tuning_block_between_nccl_tests_rows_is_listed_not_fatal() -> None:
    # Newer NCCL prints tuning tables without any `NCCL INFO` prefix inside an INFO log.
    lines = _lines(read("all_reduce_perf-4.txt"))
    block = ["  Algorithm   |            Tree |            Ring |", "  Protocol    |   LL  LL128 Simple |",
             "   Max NThreads |    512    640    512 |"]
    at = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(("#", "NCCL")))
    text = "\n".join(lines[: at + 2] + block + lines[at + 2:]) + "\n"
    result = parse_nccl_tests(text)
    assert result.rows == parse_nccl_tests(read("all_reduce_perf-4.txt")).rows
    assert [u.text.strip() for u in result.unplaced] == [b.strip() for b in block]
    assert result.complete and result.verdict == "ok"


def test_excerpt_with_ellipsis_lists_the_ellipsis() -> None:
    lines = _lines(read("ibstat-3.txt"))
    text = "\n".join([*lines[:3], "...", *lines[3:]]) + "\n"
    result = parse("ibstat", text)
    assert [(u["line"], u["text"]) for u in result["unplaced"]] == [(4, "...")]


def test_old_and_new_rdma_link_formats() -> None:
    old = parse_rdma_link("0/1: mlx5_0/1: state ACTIVE physical_state LINK_UP netdev ens1f0\n"
                          "1/1: mlx5_1/1: state DOWN physical_state DISABLED netdev ens1f1\n")
    assert [(link.device, link.port, link.state, link.netdev) for link in old.links] == [
        ("mlx5_0", 1, "ACTIVE", "ens1f0"), ("mlx5_1", 1, "DOWN", "ens1f1")]
    ib = parse_rdma_link("link mlx5_2/1 subnet_prefix fe80:0000:0000:0000 lid 12 sm_lid 1 lmc 0 state ACTIVE "
                         "physical_state LINK_UP\n")
    [link] = ib.links
    assert (link.state, link.attributes["lid"], link.attributes["sm_lid"], link.netdev) == ("ACTIVE", "12", "1", None)


def test_nccl_tests_2_19_codes_exponent_cells_and_frame() -> None:
    text = (
        "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
        "# Collective test starting: all_reduce_perf\n"
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 4000000 step: 2(factor) warmup iters: 1 iters: 5 agg iters: 1 "
        "validation: 1 graph: 0\n#\n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
        "   busbw  #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)"
        "  (GB/s)\n"
        "       4e+06         1e+06     float     sum      -1    25.10  159.36    0.00       0    24.12  165.83"
        "    0.00       0\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n#\n"
        "# Collective test concluded: all_reduce_perf\n"
    )
    result = parse_nccl_tests(text)
    assert (result.rows[0].size, result.rows[0].count) == (4_000_000, 1_000_000)
    assert (result.nccl_tests_version, result.nccl_library_version, result.nccl_version) == ("2.19.6", "2.28.9",
                                                                                            "2.28.9")
    assert (result.collective, result.verdict, result.complete, result.runs) == ("all_reduce_perf", "ok", True, 1)
    assert [version_from_code(c) for c in (22809, 21903, 2708)] == ["2.28.9", "2.19.3", "2.7.8"]


def test_two_runs_concatenated() -> None:
    result = parse_nccl_tests(read("all_gather_perf-9-two-runs.txt"))
    assert result.runs == 2 and len(result.rows) == 16
    assert (result.verdict, result.complete, result.nccl_tests_version) == ("ok", True, "2.18.0")
    assert result.nccl_library_version == "2.29.7"
    # The banners and X11 noise between the runs are listed with their line numbers.
    assert [u.line for u in result.unplaced] == [1, 2, 4, 6, 8, 35, 36, 38, 40, 42]


@pytest.mark.parametrize(("cells", "verdict"), [("0", "ok"), ("17", "wrong results")])
def test_verdict_wrong_results(cells: str, verdict: str) -> None:
    lines = _lines(read("all_reduce_perf-4.txt"))
    row = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(("#", "NCCL")))
    parts = lines[row].split()
    parts[-1] = cells
    lines[row] = "  ".join(parts)
    assert parse_nccl_tests("\n".join(lines) + "\n").verdict == verdict


def test_verdict_out_of_bounds_and_no_footer() -> None:
    text = read("all_reduce_perf-4.txt")
    assert parse_nccl_tests(text.replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED")
                            ).verdict == "out of bounds"
    cut = parse_nccl_tests(text[: text.index("# Out of bounds")])
    assert (cut.verdict, cut.complete) == ("truncated: no footer", False)
    assert cut.missing == ["footer (# Out of bounds values, # Avg bus bandwidth)"]


def test_wrapped_warn_then_traceback_keeps_the_traceback_out() -> None:
    text = read("nccl-debug-2.txt") + (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "    dist.all_reduce(t)\n"
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n"
    )
    log = parse_nccl_debug(text)
    [warning] = log.warnings
    assert warning.endswith("vendor err 129 (Recv)")  # the wrap is joined...
    assert [u.text.strip()[:9] for u in log.unplaced] == ["Traceback", "File \"tra", "dist.all_", "torch.dis"]
    [error] = log.completion_errors  # ...and read as one record
    assert (error.host, error.peer, error.status, error.vendor_error, error.opcode, error.direction) == (
        "node-2", "10.2.0.5", 12, 129, 0, "Recv")


def test_env_values_lose_nccls_trailing_period() -> None:
    log = parse_nccl_debug(read("nccl-debug-11-connect-no-route.txt"))
    assert log.env == {"NCCL_IB_DISABLE": "1"}


def test_nccl_2_5_without_using_network() -> None:
    text = ("h1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
            "h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
            "NCCL version 2.4.8+cuda10.1\n")
    log = parse_nccl_debug(text)
    assert log.network == "IB" and log.ib_devices == ["mlx5_0:1/IB"]
    # In the other order (bootstrap after IB) IB is still the data network on NCCL <= 2.5.
    swapped = "\n".join(reversed(text.strip().split("\n")[:2])) + "\nNCCL version 2.4.8+cuda10.1\n"
    assert parse_nccl_debug(swapped).network == "IB"
    assert parse_nccl_debug(read("nccl-debug-11-connect-no-route.txt")).network == "Socket"  # IB disabled


def test_nccl_2_27_per_device_lines() -> None:
    log = parse_nccl_debug(read("nccl-debug-14-per-device-2.27.txt"))
    assert log.ib_devices == ["mlx5_2:1/RoCE"]
    stamped = parse_nccl_debug(read("nccl-debug-13-timestamped-2.27.txt"))
    assert stamped.hosts == ["DESKTOP-M211L3D"]  # the timestamp before the first line is not a host
    assert stamped.ib_devices == ["bluerdma1:1/RoCE"]


def test_suspect_interfaces_and_versions_per_host() -> None:
    text = ("a1:5:5 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
            "a1:5:5 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
            "b2:6:6 [0] NCCL INFO NET/Socket : Using [0]eth0:fe80::1%eth0<0> [1]veth12ab:10.1.1.1<0>\n"
            "b2:6:6 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n")
    log = parse_nccl_debug(text)
    assert [(s.host, s.interface, s.reason) for s in log.suspect_interfaces] == [
        ("a1", "docker0", "container or virtual bridge interface"),
        ("b2", "eth0", "link-local IPv6 address"),
        ("b2", "veth12ab", "container or virtual bridge interface"),
    ]
    assert log.nccl_versions_by_host == {"a1": "2.21.5", "b2": "2.18.3"}
