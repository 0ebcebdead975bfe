"""Smoke settings: sizes, playbook verify: all_reduce, precedence of the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from provisioner.errors import ConfigErrors
from provisioner.load.playbook import load_playbook
from provisioner.smoke.settings import AllReduceSpec, Settings, parse_size, parse_sizes


@pytest.mark.parametrize(("text", "value"), [("4096", 4096), ("512K", 512 << 10), ("64M", 64 << 20),
                                             ("1G", 1 << 30), ("1GiB", 1 << 30), ("8 MB", 8 << 20), ("1.5K", 1536)])
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1X", "-4", "2"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_sweeps_double_like_nccl_tests() -> None:
    assert parse_sizes("1M:8M") == (1 << 20, 2 << 20, 4 << 20, 8 << 20)
    assert parse_sizes("1M:64M:4") == (1 << 20, 4 << 20, 16 << 20, 64 << 20)
    assert parse_sizes("8M,1M,8M") == (1 << 20, 8 << 20)
    assert parse_sizes("1M:1M") == (1 << 20,)
    too_many = ",".join(str(4 * i) for i in range(1, 70))
    for bad in ("8M:1M", "1M:8M:1", "1:2:3:4", too_many, ","):
        with pytest.raises(ValueError):
            parse_sizes(bad)


def test_command_line_wins_over_playbook_over_defaults() -> None:
    spec = AllReduceSpec(min_busbw=20, sizes="1M:4M", iters=3)
    merged = Settings().merged(spec, {"iters": 9, "backend": None})
    assert merged.min_busbw == 20
    assert merged.sizes == (1 << 20, 2 << 20, 4 << 20)
    assert merged.iters == 9
    assert merged.backend == "auto"


def test_spec_rejects_bad_values() -> None:
    with pytest.raises(ValidationError):
        AllReduceSpec(runner="mpi")
    with pytest.raises(ValidationError):
        AllReduceSpec(sizes="lots")
    with pytest.raises(ValidationError):
        AllReduceSpec(min_busbw=-1)


def test_playbook_verify_errors_name_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "site.yml"
    path.write_text("- hosts: gpu\n  verify:\n    all_reduce:\n      min_busbw: fast\n      sizez: 1M\n")
    with pytest.raises(ConfigErrors) as caught:
        load_playbook(path)
    errors = {(e.line, e.key): e.message for e in caught.value.errors}
    assert (4, "plays[0].verify.all_reduce.min_busbw") in errors
    assert "unknown key" in errors[(5, "plays[0].verify.all_reduce.sizez")]
    assert "sizes" in errors[(5, "plays[0].verify.all_reduce.sizez")]


def test_playbook_verify_is_loaded_as_a_model(tmp_path: Path) -> None:
    path = tmp_path / "site.yml"
    path.write_text("- hosts: gpu\n  verify:\n    all_reduce: {min_busbw: 2.5, sizes: '1M:4M', runner: torch}\n")
    play = load_playbook(path).plays[0]
    assert play.verify is not None and play.verify.all_reduce == AllReduceSpec(min_busbw=2.5, sizes="1M:4M",
                                                                               runner="torch")
