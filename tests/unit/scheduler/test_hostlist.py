"""Slurm hostlists, expanded by fabnet and by Slurm's own `scontrol show hostnames` (the oracle)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.scheduler.hostlist import MAX_RANGE, HostlistError, expand

# Forms Slurm expands and forms it refuses; fabnet must give the same names, or refuse the same ones.
CORPUS = [
    "gpu01", "gpu[01-04,07]", "gpu[1-10]", "gpu[01-9]", "gpu[001-3]", "gpu[1-010]", "gpu[09-100]", "gpu[0-1]",
    "gpu[00-1]", "gpu[007]", "a[1-2]b[3-4]", "a[1-2][3-4]", "a[1-2]b[1-2]c[1-2]", "n[0-1]-[2-3]", "a[1-2]x[5]",
    "gpu1,gpu[3-5]", "a,,b", "a b", "a\tb", " a", "a[1-2],b", "a,b[1-2]c[3]", "gpu[1-2],gpu[2-3]", "a[1-3,2]",
    "a[1,1]", "[1-2]",
    "a[1-3]b[1-2]c[1-2]", "a[1-2]b[1-2]c[1-2]d[1-2]", "a[1-2]b[1-3]c[1-2]",
    "a[010-12]", "a[9-11]", "a[1-65536]", "a[4294967295-4294967296]", "rack-1-gpu[1-2]",
    "é[1-2]",
    # refused by Slurm
    "gpu[3-1]", "gpu[]", "gpu[a-b]", "gpu[1-2]]", "gpu[-1]", "gpu[1,]", "a[1--2]",
    "gpu[1-70000]", "a[1-65537]", "a[1-2][]", "a[-]", "a[1-2-3]", "a[,1]", "a[10-9]",
    "a[1]]b[2]",
]
# Text after the last bracket: refused before Slurm 23.02.5, a suffix from then on (src/common/hostlist.c,
# _hostlist_create_bracketed(): "suffix only supported for dims == 1"). The oracle's release decides what
# it says, so these are checked against what 23.02.5 and later give.
SUFFIXED = {
    "x[1,2]y": ["x1y", "x2y"],
    "a[1-3]-b": ["a1-b", "a2-b", "a3-b"],
    "a-b[1-2]-c": ["a-b1-c", "a-b2-c"],
    "node[0009-0010]-int": ["node0009-int", "node0010-int"],
    "a[1-2]b[3-4]c": ["a1b3c", "a1b4c", "a2b3c", "a2b4c"],
    "a[1-2]b": ["a1b", "a2b"],
    "[1-2]b": ["1b", "2b"],
    "r[1-2]-n[1-2].ib,login": ["r1-n1.ib", "r1-n2.ib", "r2-n1.ib", "r2-n2.ib", "login"],
}
# Where Slurm prints nonsense rather than refusing, fabnet refuses (see hostlist.py).
REFUSED_HERE = ["gpu[1-", "gpu[1-2", "a[[1-2]", "a]1[", "gpu1-2]", "gpu[1-]", "a[1,2-]", "a[ 1-2]", "a[+1-2]",
                "a[1],b[2"]


def _scontrol(expression: str, conf: Path) -> list[str] | None:
    """Slurm's expansion, or None where it refuses. `show hostnames` needs no slurmctld, only a config."""
    proc = subprocess.run(["scontrol", "show", "hostnames", expression], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "SLURM_CONF": str(conf)})
    if "Invalid hostlist" in proc.stdout + proc.stderr:
        return None
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def _ours(expression: str) -> list[str] | None:
    try:
        return expand(expression)
    except HostlistError:
        return None


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("scontrol") is None:
        pytest.skip("scontrol is not installed (apt-get install slurm-client)")
    path = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    path.write_text("ClusterName=oracle\nSlurmctldHost=localhost\nNodeName=localhost\n")
    return path


@pytest.mark.parametrize("expression", CORPUS)
def test_same_names_as_scontrol(expression: str, slurm_conf: Path) -> None:
    assert _ours(expression) == _scontrol(expression, slurm_conf)


def test_the_corpus_has_both_kinds(slurm_conf: Path) -> None:
    answers = [_scontrol(e, slurm_conf) for e in CORPUS]
    assert sum(a is None for a in answers) >= 15 and sum(a is not None for a in answers) >= 20


@pytest.mark.parametrize(("expression", "names"), SUFFIXED.items())
def test_a_suffix_after_the_last_bracket_is_kept(expression: str, names: list[str]) -> None:
    assert expand(expression) == names


@pytest.mark.parametrize("expression", REFUSED_HERE)
def test_what_slurm_garbles_is_refused(expression: str) -> None:
    with pytest.raises(HostlistError) as info:
        expand(expression)
    assert repr(expression) in str(info.value)


def test_zero_padding_follows_the_lower_bound() -> None:
    assert expand("gpu[08-11]") == ["gpu08", "gpu09", "gpu10", "gpu11"]
    assert expand("gpu[8-11]") == ["gpu8", "gpu9", "gpu10", "gpu11"]


def test_of_several_brackets_the_last_varies_fastest_then_the_first() -> None:
    assert expand("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert expand("a[1-2]b[1-2]c[1-2]")[:4] == ["a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2"]


def test_the_biggest_range_slurm_takes() -> None:
    assert len(expand(f"a[1-{MAX_RANGE}]")) == MAX_RANGE
    with pytest.raises(HostlistError, match="too many hosts"):
        expand(f"a[1-{MAX_RANGE + 1}]")


def test_brackets_cannot_multiply_without_bound() -> None:
    with pytest.raises(HostlistError, match="more than"):
        expand("a[1-65536]b[1-65536]")


def test_empty_is_no_names() -> None:
    assert expand("") == [] and expand(" , ") == []
