"""ibstatus as rdma-core's script prints it: seven lines per port, `unknown` for a file it cannot read, and
output cut inside its last block named as incomplete."""

from __future__ import annotations

import pytest

from provisioner.parsers.ibstatus import parse_ibstatus

from ._samples import read


def test_pod_listing_reads_ib_and_ethernet_ports() -> None:
    facts = parse_ibstatus(read("ibstatus-1-pod-ib-and-ethernet.txt"))
    assert facts.complete is True and not facts.unplaced
    assert [p.device for p in facts.ports] == [f"mlx5_{i}" for i in range(10)]
    ib = facts.ports[1]
    assert (ib.link_layer, ib.base_lid, ib.sm_lid, ib.state, ib.state_code) == ("InfiniBand", "0xd", "0x1", "ACTIVE", 4)
    down = facts.ports[3]
    assert (down.state, down.phys_state, down.phys_state_code, down.rate, down.rate_detail) == (
        "DOWN", "Disabled", 3, 200, "4X HDR")
    assert sum(p.link_layer == "Ethernet" for p in facts.ports) == 9


def test_one_lane_rate_after_a_prompt() -> None:
    facts = parse_ibstatus(read("ibstatus-2-1x-edr-prompt.txt"))
    assert facts.complete is True and not facts.unplaced
    assert [(p.rate, p.rate_detail, p.phys_state) for p in facts.ports] == [
        (25, "1X EDR", "LinkUp"), (40, "4X QDR", "Disabled")]


def test_unknown_rate_is_none_not_a_dropped_port() -> None:
    # infiniband-diags/scripts/ibstatus (port_status) echoes `unknown` when a sysfs file is unreadable.
    text = read("ibstatus-2-1x-edr-prompt.txt").replace("40 Gb/sec (4X QDR)", "unknown")
    facts = parse_ibstatus(text)
    assert facts.complete is True
    assert facts.ports[1].rate is None and facts.ports[1].rate_detail is None


def _cuts(name: str) -> list[str]:
    """The sample cut inside each line of its last block (after the first character of the value)."""
    text = read(name).rstrip("\n")
    start = text.rindex("Infiniband device")
    cuts = []
    for end in range(start, len(text)):
        if text[end] == "\n":
            cuts.append(text[:end + 1] + text[end + 1:].split("\n")[0][:4])
        elif end > start and text[end - 1] == " " and text[end - 2] in ":\t":
            cuts.append(text[:end + 2])
    return cuts


@pytest.mark.parametrize("name", ["ibstatus-1-pod-ib-and-ethernet.txt", "ibstatus-2-1x-edr-prompt.txt"])
def test_output_cut_inside_its_last_block_is_incomplete(name: str) -> None:
    cuts = _cuts(name)
    assert len(cuts) >= 10
    for text in cuts:
        facts = parse_ibstatus(text)
        assert facts.complete is False, text[-80:]
        assert facts.missing


@pytest.mark.parametrize("tail", ["Infiniband device 'mlx5_9' po", "Infiniband dev", "\tphys st"])
def test_a_line_cut_before_its_colon_is_incomplete(tail: str) -> None:
    text = read("ibstatus-1-pod-ib-and-ethernet.txt")
    head = text[: text.rindex("Infiniband device" if tail.startswith("Infiniband") else "\tphys state")]
    facts = parse_ibstatus(head + tail)
    assert facts.complete is False
    assert any("the rest of line" in m for m in facts.missing)


def test_a_block_without_link_layer_is_whole_when_no_block_has_one() -> None:
    # Older ibstatus scripts printed six lines; only a last block shorter than the others is a cut.
    text = "".join(line for line in read("ibstatus-2-1x-edr-prompt.txt").splitlines(keepends=True)
                   if "link_layer" not in line)
    assert parse_ibstatus(text).complete is True
