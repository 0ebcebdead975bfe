"""Watch's shortcut for probes whose output files decide (facts/fingerprint.py), run as a host runs it: the
skipped probes keep their last results while their files keep their status, and every kind of change
to those files (same size and mtime restored included) runs again the probes that read them, and only
those."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from provisioner.facts import batch, fingerprint
from provisioner.load.specs import FileSpec, NcclSpec
from provisioner.resources import file as file_kind
from provisioner.resources import nccl
from provisioner.resources.base import HostContext, Probe, ProbeResult, files_probe
from tests.unit.ticking import run_ticking


def cycle(probes: list[Probe], cache: fingerprint.FactCache) -> tuple[dict[str, ProbeResult], set[str]]:
    """One watch cycle's exec: the results as the engine gets them, and the keys the node ran."""
    nonce = batch.new_nonce()
    step = fingerprint.shortcut(probes, cache)
    assert step is not None
    found = batch.split_output(run_ticking(batch.build_script(probes, nonce, shortcut=step), timeout=30)
                               .stdout.decode(), nonce)
    ran = set(found) - {step.probe.key}
    return fingerprint.fill_in(step, found), ran


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    conf = tmp_path / "conf.d"
    conf.mkdir()
    (conf / "a.conf").write_text("mtu=9000\n")
    env = tmp_path / "nccl.conf"
    env.write_text("NCCL_IB_HCA=mlx5_0\n")
    # Files written a moment ago are racily clean: with the window at 0 s, one second later they are not.
    monkeypatch.setattr(fingerprint, "RACY_SECONDS", 0)
    time.sleep(1.05)
    listing = files_probe(f"{conf}/*.conf")
    content = Probe(f"if [ -e {env} ]; then stat -c %a {env}; cat {env}; else echo missing; fi", reads=(str(env),))
    live = Probe("echo live")
    return {"conf": conf, "env": env, "probes": [listing, content, live], "file_only": {listing.key, content.key},
            "live": live.key, "listing": listing.key, "content": content.key}


def kept(cache: fingerprint.FactCache, keys: set[str]) -> bool:
    """Whether every one of these probes has a trusted reading kept."""
    return all(cache.kept.get(key, fingerprint.Kept()).status is not None for key in keys)


def test_unchanged_files_skip_their_probes_and_keep_their_results(files: dict) -> None:
    cache = fingerprint.FactCache()
    first, ran = cycle(files["probes"], cache)
    assert ran == {p.key for p in files["probes"]} and kept(cache, files["file_only"])
    for _ in range(2):
        again, ran = cycle(files["probes"], cache)
        assert ran == {files["live"]}  # the node ran only the probe that reads no file
        assert again == first and "mtu=9000" in again[files["probes"][0].key].stdout


def _same_size_old_mtime(files: dict) -> None:
    env: Path = files["env"]
    before = env.stat()
    env.write_text("NCCL_IB_HCA=mlx5_1\n")
    os.utime(env, ns=(before.st_atime_ns, before.st_mtime_ns))  # what `cp -p` or dpkg's unpack leave


def _replaced_by_rename(files: dict) -> None:
    env: Path = files["env"]
    new = env.with_name("nccl.conf.new")
    new.write_text("NCCL_IB_HCA=mlx5_1\n")
    new.rename(env)


CHANGES: dict[str, tuple[Callable[[dict], None], str]] = {  # the change, and the probe that reads what changed
    "content, same size, mtime put back": (_same_size_old_mtime, "content"),
    "replaced by a rename": (_replaced_by_rename, "content"),
    "mode": (lambda f: f["env"].chmod(0o600), "content"),
    "a file added to the folder": (lambda f: (f["conf"] / "b.conf").write_text("x\n"), "listing"),
    "a file removed from the folder": (lambda f: (f["conf"] / "a.conf").unlink(), "listing"),
    "a file renamed in the folder": (lambda f: (f["conf"] / "a.conf").rename(f["conf"] / "c.conf"), "listing"),
    "the read file removed": (lambda f: f["env"].unlink(), "content"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_any_change_to_a_read_file_runs_again_the_probe_that_reads_it(files: dict, change: str) -> None:
    cache = fingerprint.FactCache()
    first, _ = cycle(files["probes"], cache)
    assert cycle(files["probes"], cache)[1] == {files["live"]}
    make, reader = CHANGES[change]
    make(files)
    after, ran = cycle(files["probes"], cache)
    assert ran == {files["live"], files[reader]}  # the other file probe keeps its reading
    assert after[files[reader]] != first[files[reader]]
    others = {k for k in after if k != files[reader]}
    assert {k: after[k] for k in others} == {k: first[k] for k in others}
    # A file changed a moment ago is not trusted yet, so the next cycle reads it again too (a removal leaves
    # only older files); then the new reading is kept.
    if not kept(cache, files["file_only"]):
        time.sleep(1.05)
        assert cycle(files["probes"], cache)[1] == {files["live"], files[reader]}
    again, ran = cycle(files["probes"], cache)
    assert ran == {files["live"]} and again == after


def test_files_changed_within_the_racy_window_are_read_again_next_cycle(files: dict,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprint, "RACY_SECONDS", 3600)  # every file "just changed"
    cache = fingerprint.FactCache()
    for _ in range(2):
        assert cycle(files["probes"], cache)[1] == {p.key for p in files["probes"]}
        assert not any(k.status for k in cache.kept.values())


def test_a_failed_file_probe_is_never_kept(files: dict) -> None:
    broken = Probe(f"cat {files['env']}; exit 3", reads=(str(files["env"]),))
    cache = fingerprint.FactCache()
    for _ in range(2):
        results, ran = cycle([broken], cache)
        assert ran == {broken.key} and results[broken.key].exit_code == 3 and broken.key not in cache.kept


def test_a_fingerprint_that_cannot_run_reads_everything(files: dict) -> None:
    cache = fingerprint.FactCache()
    cycle(files["probes"], cache)
    nonce = batch.new_nonce()
    step = fingerprint.shortcut(files["probes"], cache)
    assert step is not None
    # stat missing from PATH: the fingerprint fails, and the probes run as if the files had changed.
    script = batch.build_script(files["probes"], nonce, shortcut=step).replace("stat -L", "stat-missing -L")
    found = batch.split_output(run_ticking(script, timeout=30).stdout.decode(), nonce)
    assert files["file_only"] <= found.keys()
    fingerprint.fill_in(step, found)
    assert not any(k.status for k in cache.kept.values())


def test_no_cache_or_no_file_only_probe_means_no_shortcut() -> None:
    assert fingerprint.shortcut([Probe("cat /etc/hostname", reads=("/etc/hostname",))], None) is None
    assert fingerprint.shortcut([Probe("ip -j link show")], fingerprint.FactCache()) is None


@pytest.mark.parametrize(("stdout", "kept"), [
    ("100 d\n50 a\n97 b\n", "50 a\n97 b"),
    ("100 d\n99 a\n", None),  # within the window
    ("100 d\n101 a\n", None),  # ctime past the clock: a clock set back
    ("100 d\nnot a line\n", None),
    ("garbage\n", None),
    ("100 d\n", ""),
])
def test_trusted_keeps_only_files_older_than_the_window(stdout: str, kept: str | None) -> None:
    assert fingerprint.trusted(stdout, racy=2) == kept


def test_the_kinds_declare_what_their_probes_read() -> None:
    ctx = HostContext("h", sysfs_root="/var/lib/lab/sys")
    [conf] = file_kind.probes(FileSpec(path="/etc/nccl.conf", content="x\n"), ctx)
    assert conf.reads == ("/etc/nccl.conf", "/etc/passwd", "/etc/group")
    for virtual in ("/proc/sys/net/ipv4/ip_forward", "/sys/class/net/eth1/mtu", "/var/lib/lab/sys/class/x"):
        assert file_kind.probes(FileSpec(path=virtual, content="1\n"), ctx)[0].reads == ()
    [package] = nccl.probes(NcclSpec(version="2.21.5"), HostContext("h"))
    assert "/var/lib/dpkg/status" in package.reads and "/etc/apt/preferences.d/fabnet-libnccl2" in package.reads
    listing = files_probe("/etc/sysctl.d/*.conf", "/etc/sysctl.conf")
    assert listing.reads == ("/etc/sysctl.d", "/etc/sysctl.d/*.conf", "/etc/sysctl.conf")


def test_a_reading_that_follows_a_process_is_kept_while_that_process_lives(files: dict) -> None:
    """`Probe.still`: the paths a reading depends on besides its files (a service's main process) are
    stat'd from the next cycle on, and the reading is kept only while they keep their status."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        def main_process(stdout: str) -> tuple[str, ...] | None:
            pid = stdout.strip().removeprefix("main=")
            return (f"/proc/{pid}",) if pid.isdigit() else None

        follows = Probe(f"echo main={proc.pid}", reads=(str(files["env"]),), still=main_process)
        unstable = Probe("echo starting", reads=(str(files["env"]),), still=main_process)
        # A process the stat cannot see (gone, or hidden by hidepid) cannot vouch for anything.
        unseen = Probe("echo main=0", reads=(str(files["env"]),), still=main_process)
        probes, cache = [follows, unstable, unseen], fingerprint.FactCache()
        ran = [cycle(probes, cache)[1] for _ in range(2)]
        assert ran == [{p.key for p in probes}] * 2  # the first cycle had not stat'd the process yet
        time.sleep(1.05)  # its /proc entry, made as the second cycle stat'd it, leaves the racy window
        cycle(probes, cache)
        results, ran = cycle(probes, cache)
        assert ran == {unstable.key, unseen.key}  # readings their `still` cannot vouch for run every cycle
        assert results[follows.key].stdout == f"main={proc.pid}\n"
        proc.kill()
        proc.wait()
        assert cycle(probes, cache)[1] == {p.key for p in probes}
    finally:
        proc.kill()
        proc.wait()
