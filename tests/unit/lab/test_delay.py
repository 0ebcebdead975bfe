"""The management delay line's pure parts: round-trip times, packet addresses, per-node delays."""

from __future__ import annotations

import pytest

from provisioner.lab.delay import DelayConfig, packet_ips, parse_rtt
from provisioner.lab.profile import Profile


@pytest.mark.parametrize(("text", "ms"), [("20ms", 20.0), ("0.5ms", 0.5), ("1s", 1000.0), ("20", 20.0),
                                          (" 0ms ", 0.0), (35, 35.0)])
def test_parse_rtt(text: str | int, ms: float) -> None:
    assert parse_rtt(text) == ms


@pytest.mark.parametrize("text", ["fast", "-1ms", "20us", "11s", ""])
def test_parse_rtt_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="round-trip time"):
        parse_rtt(text)


def test_packet_ips_reads_ipv4_and_skips_the_rest() -> None:
    header = bytes([0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 198, 18, 3, 254, 198, 18, 3, 7])
    assert packet_ips(header) == ("198.18.3.254", "198.18.3.7")
    assert packet_ips(bytes([0x60]) + bytes(39)) is None  # IPv6
    assert packet_ips(header[:10]) is None


def test_each_direction_waits_half_the_nodes_round_trip(tmp_path) -> None:
    config = DelayConfig("fn01-rtt", "fabnet-x-rtt", "rtt0", 20.0, {"198.18.1.2": 60.0})
    assert config.one_way("198.18.1.1") == pytest.approx(0.010)
    assert config.one_way("198.18.1.2") == pytest.approx(0.030)
    path = tmp_path / "delay.json"
    path.write_text(config.to_json())
    assert DelayConfig.load(path) == config


def test_profile_sets_a_nodes_round_trip_time() -> None:
    profile = Profile.model_validate({"nodes": {"gpu02": {"mgmt_rtt_ms": 60}}})
    assert profile.node_state("gpu01").mgmt_rtt_ms is None
    assert profile.node_state("gpu02").mgmt_rtt_ms == 60
    with pytest.raises(ValueError):
        Profile.model_validate({"defaults": {"mgmt_rtt_ms": -1}})


def test_state_files_with_fields_this_version_lacks_still_load(tmp_path, monkeypatch) -> None:
    import json

    from provisioner.lab.state import LabState

    monkeypatch.setenv("FABNET_LAB_ROOT", str(tmp_path))
    (tmp_path / "x").mkdir()
    state = {"name": "x", "slot": 3, "profile": "p.yml", "from_the_future": 1,
             "nodes": [{"index": 1, "name": "gpu01", "netns": "n", "mgmt_ip": "198.18.3.1", "data_ip": "198.19.3.1",
                        "counters": "later"}]}
    (tmp_path / "x" / "state.json").write_text(json.dumps(state))
    loaded = LabState.load("x")
    assert loaded is not None and loaded.slot == 3 and loaded.nodes[0].name == "gpu01"
    assert loaded.rtt_ms == 0.0 and loaded.delay_pid is None
    (tmp_path / "x" / "delay.json").write_text(json.dumps({"rtt_ms": 20}))
    (tmp_path / "x" / "delay.pid").write_text("4242\n")
    assert loaded.rtt_ms == 20.0 and loaded.delay_pid == 4242
