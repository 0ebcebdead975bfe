"""`explain` on field logs from RCCL 2.2x and the node settings RCCL warns about (tests/samples/logs/, sources
in tests/samples/INDEX.md): a dated WARN and the `[FATAL ERROR]: HIP failure` line after it read as the one
failure they are, and `Missing "iommu=pt"`-style warnings name the settings, the hosts and the fix."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # RCCL 2.27.7: a dated WARN from the P2P transport, then `[FATAL ERROR]: HIP failure: 'invalid argument'`.
    # Before: the P2P cause and a second one, `a HIP call failed: invalid argument`, for the same call.
    "rccl-ipc-fatal-error-dated-1.txt": (
        "gpu-p2p-failure", "hipIpcGetMemHandle failed : invalid argument", "amd-smi topology"),
    # Only RCCL's settings warnings (MI250X, no result yet). Before: nothing named.
    "rccl-node-settings-warnings-1.txt": ("rccl-node-settings", 'Missing "amd_iommu=on"', "GRUB_CMDLINE_LINUX"),
}
# file -> the hosts the top cause names (the first report masks its host as `node`, without pid and thread)
HOSTS: dict[str, list[str]] = {
    "rccl-ipc-fatal-error-dated-1.txt": [],
    "rccl-node-settings-warnings-1.txt": ["g1072"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_the_fatal_error_line_joins_the_p2p_failure() -> None:
    causes = causes_of("rccl-ipc-fatal-error-dated-1.txt")
    assert [c.id for c in causes] == ["gpu-p2p-failure", "rccl-node-settings"]
    assert any("[FATAL ERROR]" in e.text for e in causes[0].evidence)
    assert "iommu=pt" in causes[1].title


def test_every_setting_rccl_named_is_in_the_fix() -> None:
    top = causes_of("rccl-node-settings-warnings-1.txt")[0]
    for said in ("`amd_iommu=on`", "`iommu=pt`", "`HSA_FORCE_FINE_GRAIN_PCIE=1`"):
        assert said in top.fix, top.fix
    assert top.settings == ["HSA_FORCE_FINE_GRAIN_PCIE=1"]
