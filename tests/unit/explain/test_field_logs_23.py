"""`explain` on field logs of Slurm tasks whose container never started: pyxis and enroot failing to import
the image or to start it (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, table, words

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # pyxis#41: the squashfs did not fit the tmpfs under /run/pyxis. Before: no cause named.
    "pyxis-import-squashfs-no-space-1.txt": (
        "container-start-failed", "No space left on device", "runtime_path"),
    # SlinkyProject/containers#2: enroot's GPU hook failed inside a containerised slurmd. Before: "task 0 on
    # gpu-1-0 exited with exit code 1", the program blamed.
    "pyxis-nvidia-hook-ldcache-2.txt": (
        "container-start-failed", "nvidia-container-cli: ldcache error", "libnvidia-container"),
    # enroot#177: an image without a shell. Before: no cause named.
    "enroot-switchroot-no-shell-3.txt": (
        "container-start-failed", "enroot-switchroot: failed to execute: /bin/sh", "/bin/sh"),
}
HOSTS: dict[str, list[str]] = {
    "pyxis-import-squashfs-no-space-1.txt": [],
    "pyxis-nvidia-hook-ldcache-2.txt": ["gpu-1-0"],
    "enroot-switchroot-no-shell-3.txt": [],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_the_task_that_never_started_is_not_blamed_on_its_program() -> None:
    ids = [c.id for c in causes_of("pyxis-nvidia-hook-ldcache-2.txt")]
    assert "rank-exited" not in ids, ids


_VERDICT = ("slurmstepd: error: pyxis: couldn't start container",
            "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1",
            "srun: error: node07: task 0: Exited with exit code 1")


@pytest.mark.parametrize(("said", "holds"), [
    ("[ERROR] URL https://nvcr.io/v2/nvidia/pytorch/manifests/24.01-py3 returned error code: 401 Unauthorized",
     "credentials"),
    ("mkdir: cannot create directory '/run/user/1000': Permission denied", "ENROOT_RUNTIME_PATH"),
    ("tar: usr/lib/libcudnn.so.8: Cannot write: No space left on device", "runtime_path"),
    ("[ERROR] Command not found: nvidia-container-cli, see https://github.com/NVIDIA/libnvidia-container",
     "libnvidia-container"),
    ("enroot-switchroot: failed to execute: /usr/bin/python3: No such file or directory", "--no-container-entrypoint"),
    ("[ERROR] Some other failure enroot has no words for yet", "enroot start"),
])
def test_each_reason_enroot_gives_has_its_fix(said: str, holds: str) -> None:
    text = "\n".join(("pyxis: importing docker image ...", "slurmstepd: error: pyxis: failed to import docker image",
                      "slurmstepd: error: pyxis: printing enroot log file:",
                      "slurmstepd: error: pyxis:     [INFO] Querying registry for permission grant",
                      f"slurmstepd: error: pyxis:     {said}", *_VERDICT))
    causes = explain([("srun.log", text)]).causes
    assert causes and causes[0].id == "container-start-failed", causes
    assert causes[0].hosts == ["node07"], causes[0].hosts
    assert holds in words(causes[0]), words(causes[0])
    assert [c.id for c in causes].count("rank-exited") == 0, causes
