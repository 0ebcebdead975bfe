"""show_gids run for several devices back to back, and GIDs compared in one normal form across tools."""

from __future__ import annotations

import pytest

from provisioner.parsers._gid import normal_gid, same_gid
from provisioner.parsers.ibv_devinfo import parse_ibv_devinfo
from provisioner.parsers.show_gids import parse_show_gids

from ._samples import read, rejected


def _line(name: str, start: str) -> str:
    """The one line of a real sample that starts (after its indentation) with `start`."""
    (line,) = [line for line in read(name).splitlines() if line.strip().startswith(start)]
    return line


# ------------------------------------------------------------------------------------- back to back


def test_two_real_tables_back_to_back_keep_every_row() -> None:
    # `show_gids mlx5_0` (with its prompt line) then a plain `show_gids` of another host, as one paste.
    first, second = read("show_gids-6-prompt.txt"), read("show_gids-1.txt")
    result = parse_show_gids(first + second)
    assert (result.complete, result.missing, result.unplaced) == (True, [], [])
    assert len(result.gids) == 6 + 19 and result.n_gids_found == 6 + 19
    assert [(t.line, t.rows, t.n_gids_found) for t in result.tables] == [(2, 6, 6), (11, 19, 19)]
    assert result.tables[0].devices == ["mlx5_0"] and result.tables[1].devices[-1] == "mlx5_7"
    assert result.gids == parse_show_gids(first).gids + parse_show_gids(second).gids


COMMANDS = ["show_gids", "show_gids mlx5_0", "sudo show_gids mlx5_0 1", "$ show_gids", "# show_gids",
            "# show_gids mlx5_0 | grep v2", "$ sudo -E /usr/sbin/show_gids mlx5_0", "root@gpu07:~# show_gids"]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_command_pasted_with_or_without_its_prompt_is_no_row(command: str) -> None:
    # A real table after its command line, as a terminal shows it: root's bare `# `, a `$ `, or no prompt.
    table = read("show_gids-6-prompt.txt").split("\n", 1)[1]
    with_prompt, bare = parse_show_gids(read("show_gids-6-prompt.txt")), parse_show_gids(f"{command}\n{table}")
    assert (bare.complete, bare.missing, bare.unplaced) == (True, [], [])
    assert bare.gids == with_prompt.gids


@pytest.mark.parametrize("command", COMMANDS)
def test_the_command_alone_is_named_as_such_not_as_a_short_row(command: str) -> None:
    line, reason = rejected(parse_show_gids, f"{command}\n")
    assert line is None and reason == "no show_gids header, rows or n_gids_found trailer after the command line"


def test_a_session_of_bare_commands_keeps_every_table() -> None:
    # `show_gids mlx5_0` then `show_gids mlx5_1`, the prompts cut off: the second command follows a trailer.
    first, second = read("show_gids-6-prompt.txt").split("\n", 1)[1], read("show_gids-3.txt")
    result = parse_show_gids(f"show_gids mlx5_0\n{first}# show_gids mlx5_1\n{second}")
    assert (result.complete, result.missing, result.unplaced) == (True, [], [])
    assert [(t.line, t.rows, t.n_gids_found) for t in result.tables] == [(2, 6, 6), (12, 5, 5)]


@pytest.mark.parametrize("row", ["mlx5_0 1 3", "mlx5_0\t1\t3\tfe80::1", "show_gidsX 1 3", "# mlx5_0 1"])
def test_a_short_row_is_still_a_short_row(row: str) -> None:
    # Only a line that runs show_gids is a command: a row cut short, whatever its first cell, is reported.
    table = read("show_gids-6-prompt.txt")
    result = parse_show_gids(table.replace("n_gids_found=6", f"{row}\nn_gids_found=6"))
    assert [(u.line, u.reason) for u in result.unplaced] == [
        (10, "row has too few columns (expected DEV PORT INDEX GID [IPv4] VER [DEV])")]
    assert len(result.gids) == 6 and result.complete


def test_each_table_is_checked_against_its_own_trailer() -> None:
    lines = read("show_gids-6-prompt.txt").splitlines(keepends=True)
    del lines[5]  # one row of the first table lost; the totals alone would hide which table lacks it
    result = parse_show_gids("".join(lines) + read("show_gids-3.txt"))
    assert result.complete is False
    assert result.missing == ["1 GID rows of the table at line 2 (mlx5_0) (the trailer says 6, 5 were printed)"]
    assert [(t.rows, t.n_gids_found) for t in result.tables] == [(5, 6), (5, 5)]


def test_real_table_followed_by_its_own_header_only_is_cut() -> None:
    text = read("show_gids-3.txt")
    result = parse_show_gids(text + text.splitlines(keepends=True)[0])
    assert result.complete is False
    assert result.missing == ["the n_gids_found trailer of the table at line 9, cut before its first row "
                              "(show_gids prints it after the last row)"]
    assert len(result.gids) == 5 and result.n_gids_found == 5 and result.unplaced == []
    assert [(t.line, t.devices, t.rows, t.n_gids_found) for t in result.tables][-1] == (9, [], 0, None)


def test_second_table_cut_mid_way_is_incomplete_and_keeps_its_rows() -> None:
    second = read("show_gids-1.txt").splitlines(keepends=True)[:6]  # header, rule, four rows
    result = parse_show_gids(read("show_gids-8-ib-row-no-dev.txt") + "".join(second))
    assert result.complete is False
    assert result.missing[0].startswith("the n_gids_found trailer of the table at line 9 (mlx5_0, mlx5_1)")
    assert len(result.gids) == 5 + 4 and result.n_gids_found == 5


def test_a_row_after_a_trailer_without_a_header_is_still_unplaced() -> None:
    text = read("show_gids-3.txt")
    row = text.splitlines(keepends=True)[2]
    result = parse_show_gids(text + row)
    assert [u.line for u in result.unplaced] == [9]
    assert "without a new DEV" in (result.unplaced[0].reason or "")


# ------------------------------------------------------------------------------------------ normal form


def test_normal_form_is_the_full_form_show_gids_prints() -> None:
    row = _line("show_gids-1.txt", "mlx5_3  1       2")
    (gid,) = parse_show_gids(row).gids
    assert gid.gid_normal == gid.gid == "0000:0000:0000:0000:0000:ffff:c0a8:f238"
    assert normal_gid("::ffff:192.168.242.56") == gid.gid  # not Python's compressed `::ffff:c0a8:f238`


def test_ibv_devinfo_full_and_short_forms_of_one_gid_are_equal() -> None:
    # One rdma-core `ibv_devinfo -v` printed the same GIDs both ways (RoCE v1 full, RoCE v2 short).
    (device,) = parse_ibv_devinfo(read("ibv_devinfo-v-6-cx6-nested-caps.txt")).devices
    gids = device.ports[0].gids
    assert (gids[0].gid, gids[1].gid) == ("fe80:0000:0000:0000:ba59:9fff:fe37:8268", "fe80::ba59:9fff:fe37:8268")
    assert gids[0].gid_normal == gids[1].gid_normal == gids[0].gid
    assert (gids[2].gid, gids[3].gid) == ("0000:0000:0000:0000:0000:ffff:c0a8:010b", "::ffff:192.168.1.11")
    assert gids[2].gid_normal == gids[3].gid_normal == gids[2].gid


def test_show_gids_full_form_equals_ibv_devinfo_short_form() -> None:
    # show_gids-1's mlx5_3 row (full form) and ibv_devinfo-v-7's GID[2] of that port (full, older release)
    # are one GID; a newer rdma-core prints it short, as ibv_devinfo-v-6 prints its index 3 line.
    row = parse_show_gids(_line("show_gids-1.txt", "mlx5_3  1       3")).gids[0]
    old = _line("ibv_devinfo-v-7-ofed4-blocks.txt", "GID[  2]:")
    new = _line("ibv_devinfo-v-6-cx6-nested-caps.txt", "GID[  3]:").replace("192.168.1.11", row.ipv4 or "")
    header = "hca_id:\tmlx5_3\n\tport:\t1\n\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    gids = {}
    for line in (old, new):
        port = parse_ibv_devinfo(header + line + "\n").devices[0].ports[0]
        gids[port.gids[0].gid] = port.gids[0]
    assert set(gids) == {"0000:0000:0000:0000:0000:ffff:c0a8:f238", "::ffff:192.168.242.56"}
    assert row.gid != gids["::ffff:192.168.242.56"].gid  # as printed they differ
    assert {g.gid_normal for g in gids.values()} == {row.gid_normal}
    assert same_gid(row.gid, "::ffff:192.168.242.56")


@pytest.mark.parametrize("value", ["fe80::1%eth0", "fe80:0000", "10.0.0.1", "GID"])
def test_text_that_is_no_gid_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        normal_gid(value)
    assert same_gid(value, value) is False
