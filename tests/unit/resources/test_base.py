"""The shared pieces: probe failure messages and the config-file listing (run in a real POSIX shell)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.resources.base import (
    ProbeResult,
    parse_file_listing,
    print_files_command,
    probe_error,
    read_lines_command,
    read_tree_command,
    read_value_command,
    sh,
)


def test_sh_quotes_every_part() -> None:
    assert sh("cat", "--", "/etc/it's here; rm -rf /") == "cat -- '/etc/it'\"'\"'s here; rm -rf /'"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ProbeResult("out", "", 0), None),
        (None, "lsmod: no output (the probe did not run)"),
        (ProbeResult("", "sh: 1: lsmod: not found", 127), "lsmod: command not found on the host"),
        (ProbeResult("", "", 124), "lsmod: timed out"),
        (ProbeResult("", "lsmod: ERROR: could not open '/proc/modules'\nmore\n", 1),
         "lsmod: exit code 1: lsmod: ERROR: could not open '/proc/modules'"),
        (ProbeResult("", "", 3), "lsmod: exit code 3"),
    ],
)
def test_probe_error(result: ProbeResult | None, expected: str | None) -> None:
    assert probe_error(result, "lsmod") == expected


def test_file_listing_round_trips_through_a_real_shell(tmp_path: Path) -> None:
    conf = tmp_path / "conf.d"
    conf.mkdir()
    (conf / "10-a.conf").write_text("a = 1\nb = 2\n")
    (conf / "20-b.conf").write_text("no final newline")
    (conf / "30-empty.conf").write_text("")
    (conf / "35-blank.conf").write_text("\n\nx\n\n")
    (conf / "40-dir.conf").mkdir()  # directories are skipped, not cat'ed
    (conf / "50-bogus.conf").symlink_to(tmp_path / "nowhere")  # a dangling link is not a file
    command = print_files_command(f"{conf}/*.conf", f"{tmp_path}/missing-dir/*.conf", f"{tmp_path}/single")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    listing = parse_file_listing(done.stdout)
    assert listing.files == {
        f"{conf}/10-a.conf": "a = 1\nb = 2\n",
        f"{conf}/20-b.conf": "no final newline",
        f"{conf}/30-empty.conf": "",
        f"{conf}/35-blank.conf": "\n\nx\n\n",
    }
    assert listing.unreadable == ()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_file_listing_marks_unreadable_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.conf"
    secret.write_text("x\n")
    secret.chmod(0)
    done = subprocess.run(["sh", "-c", print_files_command(f"{tmp_path}/*.conf")], capture_output=True, text=True,
                          check=False)
    assert parse_file_listing(done.stdout).unreadable == (str(secret),)


def test_file_listing_parses_unreadable_marker() -> None:
    listing = parse_file_listing("==! /etc/NetworkManager/system-connections/a b <==\n==> /etc/x <==\nx\n\n")
    assert listing.unreadable == ("/etc/NetworkManager/system-connections/a b",)
    assert listing.files == {"/etc/x": "x\n"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab =#\n\t"), max_size=30), min_size=1, max_size=4))
def test_any_files_text_comes_back_exactly(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        for number, text in enumerate(texts):
            Path(directory, f"{number}.conf").write_text(text)
        done = subprocess.run(["sh", "-c", print_files_command(f"{directory}/*.conf")], capture_output=True,
                              text=True, check=False)
        assert parse_file_listing(done.stdout).files == {
            f"{directory}/{number}.conf": text for number, text in enumerate(texts)}


@pytest.mark.parametrize("text", ["1\n", "4096\t87380 6291456\n", "two\nlines\n", "", "  spaced \\ back\n"])
def test_a_value_read_by_the_shell_prints_what_cat_prints(tmp_path: Path, text: str) -> None:
    value = tmp_path / "it's a value"
    value.write_text(text)
    for path in (value, tmp_path / "missing"):
        ours = subprocess.run(["sh", "-c", read_value_command(sh(str(path)))], capture_output=True, text=True,
                              check=False)
        theirs = subprocess.run(["cat", "--", str(path)], capture_output=True, text=True, check=False)
        assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr)


@pytest.mark.parametrize("texts", [
    {"0": "1\n", "1": "0\n", "7": "1"},  # sysfs values, one without a final line break
    {"a": "two\n\nlines \\t %s\n", "b": ""},  # an empty line and an empty file print nothing
])
def test_a_folder_read_by_the_shell_prints_what_grep_prints(tmp_path: Path, texts: dict[str, str]) -> None:
    np, rp = tmp_path / "it's np", tmp_path / "rp"
    for folder in (np, rp):
        folder.mkdir()
        for name, text in texts.items():
            (folder / name).write_text(text)
    for folders in ((np, rp), (np, tmp_path / "missing")):
        command = read_tree_command(*(sh(str(f)) for f in folders))
        ours = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
        theirs = subprocess.run(["grep", "-r", "-H", ".", "--", *map(str, folders)], capture_output=True,
                                text=True, check=False)
        assert (ours.returncode, sorted(ours.stdout.splitlines(True)), ours.stderr) == (
            theirs.returncode, sorted(theirs.stdout.splitlines(True)), theirs.stderr)


def test_files_read_by_the_shell_print_what_grep_prints_and_grep_speaks_for_any_that_will_not_read(
        tmp_path: Path) -> None:
    values = {"it's 1": "1\n", "two": "two\n\nlines \\t %s", "empty": "", "blank": "\n\n"}
    for name, text in values.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "folder").mkdir()
    # The shell reads an I/O error as the end of the file; grep names it: /proc/self/mem refuses offset 0.
    (tmp_path / "eio").symlink_to("/proc/self/mem")
    cases = [["it's 1", "two"], ["it's 1", "empty", "two"], ["blank"], ["two", "eio"], ["it's 1", "folder"],
             ["missing", "two"]]
    for names in cases:
        files = [str(tmp_path / n) for n in names]
        words = " ".join(sh(f) for f in files)
        command = read_lines_command(words, f"grep -r -H . -- {words} 2>&1")
        ours = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
        theirs = subprocess.run(["grep", "-r", "-H", ".", "--", *files], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, check=False)
        assert (ours.stdout, ours.stderr) == (theirs.stdout, ""), names
    # No files, no output (grep -r would read the working folder instead).
    assert subprocess.run(["sh", "-c", read_lines_command("", "grep -r -H .")], capture_output=True, text=True,
                          check=True).stdout == ""
    # Where every file reads, no program starts: the same command with no grep on PATH still prints them all.
    command = read_lines_command(" ".join(sh(str(tmp_path / n)) for n in ("it's 1", "two")), "grep nothing")
    alone = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False,
                           env={"PATH": str(tmp_path / "nowhere")})
    assert alone.stdout == f"{tmp_path}/it's 1:1\n{tmp_path}/two:two\n{tmp_path}/two:lines \\t %s\n"
