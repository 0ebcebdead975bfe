"""`ncclras -f json` (NCCL 2.28.7 on) read as the text report is. Two recorded 2.28.9 documents (tests/samples/logs/,
sources in tests/samples/INDEX.md) come first; the built documents after them are laid out as NCCL's writer lays them
out (src/ras/client_support.cc, its json* functions, 2.28.7 to 2.30.7): one key a line, a rank's `status` and
`collective_counts` as nested objects. 2.28.x leaves out the comma after a missing rank's `nvml_dev` (fixed in
2.29.2); both layouts are read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provisioner.explain import explain
from provisioner.explain.logs import read_log
from provisioner.explain.model import Cause
from provisioner.explain.ras_json import documents, entries

LOGS = Path(__file__).resolve().parents[2] / "samples" / "logs"


def test_a_recorded_document_with_one_rank_an_operation_behind_names_that_rank() -> None:
    name = "ncclras-json-mismatch-a10g-2.28.9.txt"
    log = read_log(name, (LOGS / name).read_text())
    assert len(documents(log)) == 1 and entries(log) == []  # every rank answered, none in error
    top = explain([(name, (LOGS / name).read_text())]).causes[0]
    assert top.id == "collective-desync" and top.hosts == ["10.0.109.86"]
    assert ("different AllReduce operation counts (3 ranks up to operation 101; rank 1 on 10.0.109.86 up to "
            "operation 100): behind is rank 1") in top.detail


def test_a_recorded_document_without_the_comma_names_the_rank_that_did_not_answer() -> None:
    name = "ncclras-json-unresponsive-2.28.9-missing-comma.txt"
    text = (LOGS / name).read_text()
    assert '"nvml_dev": 1\n          "status"' in text  # as NCCL 2.28.9 wrote it
    log = read_log(name, text)
    assert [(e.kind, [w.rank for w in e.who]) for e in entries(log)] == [("INCOMPLETE", [1])]
    top = explain([(name, text)]).causes[0]
    assert top.id == "ras-process-unresponsive" and top.hosts == ["10.0.77.184"]
    assert "rank 1 (process 10017, GPU 1) on 10.0.77.184" in top.detail
    assert "communicator (a1349768e9517ed7) is missing rank 1" in top.detail
    assert "RAS has not declared them dead" in top.detail


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _rank(rank: int, host: str, pid: int, gpu: int, *, init: int = 0, error: int = 0, abort: bool = False,
          ops: int = 64) -> str:
    return (f'        {{\n          "rank": {rank},\n          "host": "{host}",\n          "pid": {pid},\n'
            f'          "cuda_dev": {gpu},\n          "nvml_dev": {gpu},\n          "status": {{\n'
            f'            "init_state": {init},\n            "async_error": {error},\n'
            f'            "finalize_called": false,\n            "destroy_flag": false,\n'
            f'            "abort_flag": {_flag(abort)}\n          }},\n          "collective_counts": {{\n'
            f'            "Broadcast": 0,\n            "AllReduce": {ops}\n          }}\n        }}')


def _missing(rank: int, host: str, pid: int, gpu: int, *, dead: bool = False, release: str = "2.29.2") -> str:
    comma = "" if release.startswith("2.28") else ","
    return (f'        {{\n          "rank": {rank},\n          "host": "{host}",\n          "pid": {pid},\n'
            f'          "cuda_dev": {gpu},\n          "nvml_dev": {gpu}{comma}\n          "status": {{\n'
            f'            "unresponsive": true,\n            "considered_dead": {_flag(dead)}\n          }}\n'
            "        }")


def _doc(ranks: list[str], missing: list[str], *, timeouts: int = 0, release: str = "2.29.2") -> str:
    size = len(ranks) + len(missing)
    return (f'{{\n  "nccl_version": "{release}",\n  "cuda_runtime_version": 12090,\n  "cuda_driver_version": 12090,\n'
            '  "timestamp": "2026-01-05 10:00:00",\n  "communicators_count": 1,\n  "communicators": [\n    {\n'
            '      "hash": "0x1bdb83b038775869",\n      "secondary_hash": "0x5a:0x6b",\n'
            f'      "size": {size},\n      "ranks_count": {len(ranks)},\n      "missing_ranks_count": {len(missing)},\n'
            '      "ranks": [\n' + ",\n".join(ranks) + '\n      ],\n      "missing_ranks": [\n' + ",\n".join(missing)
            + '\n      ]\n    }\n  ],\n  "ras": {\n    "collection_time_sec": 0.125,\n'
            f'    "timeouts_count": {timeouts}\n  }}\n}}\n')


def _causes(text: str) -> list[Cause]:
    return explain([("ras.json", text)]).causes


_HEALTHY = [_rank(r, "10.0.0.1", 100 + r, r) for r in range(4)]


@pytest.mark.parametrize("release", ["2.28.7", "2.29.2"])
def test_a_missing_rank_not_answering_names_its_node(release: str) -> None:
    text = _doc(_HEALTHY, [_missing(4, "10.0.0.2", 204, 0, release=release)], release=release)
    top = _causes(text)[0]
    assert top.id == "ras-process-unresponsive" and top.hosts == ["10.0.0.2"]
    assert "rank 4 (process 204, GPU 0) on 10.0.0.2" in top.detail
    assert "communicator (1bdb83b038775869) is missing rank 4" in top.detail
    assert top.evidence[0].text == '"hash": "0x1bdb83b038775869",'


def test_a_rank_considered_dead_reads_as_dead() -> None:
    text = _doc(_HEALTHY, [_missing(4, "10.0.0.2", 204, 0, dead=True, release="2.28.7")], release="2.28.7")
    top = _causes(text)[0]
    assert top.id == "ras-process-dead" and top.hosts == ["10.0.0.2"]
    assert "lost 1 job process for good: rank 4 (process 204, GPU 0) on 10.0.0.2" in top.detail


def test_a_rank_with_an_asynchronous_error_is_named() -> None:
    text = _doc([*_HEALTHY[:3], _rank(3, "10.0.0.3", 303, 3, error=2)], [])
    top = _causes(text)[0]
    assert top.id == "ras-rank-error" and top.hosts == ["10.0.0.3"]
    assert "asynchronous error on 1 rank (system error on rank 3 (process 303, GPU 3) on 10.0.0.3)" in top.detail


def test_a_rank_that_aborted_is_in_another_state() -> None:
    text = _doc([*_HEALTHY[:3], _rank(3, "10.0.0.3", 303, 3, abort=True)], [])
    top = _causes(text)[0]
    assert top.id == "ras-status-mismatch" and top.hosts == ["10.0.0.3"]
    assert "rank 3 (process 303, GPU 3) on 10.0.0.3 is ABORT" in top.detail


def test_a_rank_behind_on_an_operation_is_a_desync() -> None:
    text = _doc([*_HEALTHY[:3], _rank(3, "10.0.0.3", 303, 3, ops=60)], [])
    top = _causes(text)[0]
    assert top.id == "collective-desync" and top.hosts == ["10.0.0.3"]
    assert "different AllReduce operation counts (3 ranks up to operation 64; rank 3 on 10.0.0.3 up to operation " \
           "60): behind is rank 3" in top.detail


def test_timeouts_while_gathering_are_said() -> None:
    top = _causes(_doc(_HEALTHY, [], timeouts=2))[0]
    assert top.id == "ras-process-unresponsive" and "2 communication timeouts" in top.detail


def test_a_healthy_document_names_nothing() -> None:
    assert not _causes(_doc(_HEALTHY, []))


def test_a_healthy_document_beside_a_watchdog_timeout_says_no_rank_was_missing() -> None:
    watchdog = ("[rank1]:[E105 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
                "ran for 600010 milliseconds before timing out.\n")
    causes = explain([("ras.json", _doc(_HEALTHY, [])), ("rank1.log", watchdog)]).causes
    top = causes[0]
    assert top.id == "collective-timeout", [c.id for c in causes]
    assert "NCCL's RAS report saw all 4 ranks running and reachable" in top.detail
    assert top.evidence[-1].text == '"communicators": ['
    behind = _doc([*_HEALTHY[:3], _rank(3, "10.0.0.3", 303, 3, ops=60)], [])
    assert all("saw all" not in c.detail for c in explain([("ras.json", behind), ("rank1.log", watchdog)]).causes)


def test_a_document_pasted_among_other_lines_is_read() -> None:
    text = ("$ ncclras -f json\n" + _doc(_HEALTHY, [_missing(4, "10.0.0.2", 204, 0)]) + "$ exit\n")
    assert _causes(text)[0].hosts == ["10.0.0.2"]


@pytest.mark.parametrize("text", [
    '{\n  "schema": "other/v1",\n  "communicators": 3\n}\n',
    '{\n  "communicators": [\n    {"name": "x"}\n  ]\n}\n',
    '{\n  "communicators": [\n',
])
def test_other_json_is_not_a_report(text: str) -> None:
    assert not documents(read_log("x.json", text))


def test_every_rank_keeps_its_own_line() -> None:
    log = read_log("ras.json", _doc(_HEALTHY[:1], [_missing(1, "10.0.0.2", 201, 1), _missing(2, "10.0.0.3", 302, 2)]))
    found: dict[str, Any] = {e.kind: e for e in entries(log)}
    assert [(w.rank, w.line.text) for w in found["INCOMPLETE"].who] == [(1, '"rank": 1,'), (2, '"rank": 2,')]
    assert found["INCOMPLETE"].who[1].line.number > found["INCOMPLETE"].who[0].line.number
