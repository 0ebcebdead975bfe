"""A probe's own output is parsed as printed (terminal escapes aside); a paste is cleaned first."""

from __future__ import annotations

import threading

from provisioner.parsers._live import host_output, reading_host_output
from provisioner.parsers._text import split_lines

PASTE_LIKE = "gpu07: \x1b[1mport:\x1b[0m 1  # the slow one\ngpu07: state: PORT_ACTIVE (4)\n"


def test_host_output_loses_only_terminal_escapes() -> None:
    with reading_host_output():
        lines = split_lines(PASTE_LIKE)
    assert [line.text for line in lines] == ["gpu07: port: 1  # the slow one", "gpu07: state: PORT_ACTIVE (4)"]
    assert [line.raw for line in lines] == ["gpu07: \x1b[1mport:\x1b[0m 1  # the slow one",
                                            "gpu07: state: PORT_ACTIVE (4)"]


def test_a_paste_still_loses_labels_and_notes() -> None:
    assert [line.text for line in split_lines(PASTE_LIKE)] == ["port: 1", "state: PORT_ACTIVE (4)"]


def test_the_setting_is_the_block_s_and_the_thread_s_own() -> None:
    seen: list[bool] = []
    with reading_host_output():
        worker = threading.Thread(target=lambda: seen.append(host_output()))
        worker.start()
        worker.join()
        assert host_output()
    assert seen == [False] and not host_output()
