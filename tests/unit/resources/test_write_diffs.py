"""plan/apply --diff: every step that writes a file carries a unified diff of it, whichever kind wrote it."""

from __future__ import annotations

from provisioner.evaluate.engine import ResourceOutcome
from provisioner.plan import planner as plan
from provisioner.resources.steps import DIFF_LINES, text_diff

from ._recorded import IP_LINK, LSMOD, NETWORKD_DATA, fix, listing

LIVE, BOOT = "/proc/sys/", "/etc/sysctl.d/"
VENDOR = "/etc/sysctl.d/90-vendor.conf"


def _writes(steps: list) -> list:
    return [s for s in steps if s.writes]


def test_a_persistent_mtu_edit_shows_the_line_it_changes() -> None:
    data = NETWORKD_DATA.replace("MTUBytes=9000", "MTUBytes=1500")
    steps = fix("interface", {"name": "eth1", "mtu": 9000, "persistent": True},
                {"ip -j -d link show": IP_LINK, "/etc/systemd/network/": listing(
                    {"/etc/systemd/network/10-data.network": data})})
    [write] = _writes(steps)
    assert write.diff is not None
    lines = write.diff.splitlines()
    assert lines[0] == "--- /etc/systemd/network/10-data.network (on host)"
    assert "-MTUBytes=1500" in lines and "+MTUBytes=9000" in lines
    assert "Address=192.0.2.2/24" not in write.diff  # one line of context, not the whole file


def test_a_module_listed_for_boot_in_a_new_file_diffs_from_no_file() -> None:
    steps = fix("kernel_module", {"name": "nvidia_peermem"},
                {"lsmod": LSMOD, "/etc/modules-load.d/": listing({"/etc/modules-load.d/rdma.conf": "mlx5_ib\n"})})
    [write] = _writes(steps)
    assert write.diff is not None
    assert write.diff.splitlines()[:2] == ["--- /dev/null (no file on host)",
                                           "+++ /etc/modules-load.d/nvidia_peermem.conf (desired)"]
    assert "+nvidia_peermem" in write.diff.splitlines()


def test_a_module_taken_off_a_boot_list_shows_the_line_removed() -> None:
    steps = fix("kernel_module", {"name": "overlay", "state": "absent"},
                {"lsmod": LSMOD, "/etc/modules-load.d/": listing({"/etc/modules-load.d/docker.conf":
                                                                  "overlay\nbr_netfilter\n"})})
    [write] = _writes(steps)
    assert write.diff is not None and "-overlay" in write.diff.splitlines()
    assert "+br_netfilter" not in write.diff  # kept, so context at most


def test_two_sysctl_edits_of_one_file_show_one_diff_holding_both() -> None:
    text = "# vendor\nnet.ipv4.conf.all.arp_ignore = 0\nnet.core.rmem_max = 5\nnet.ipv4.conf.all.arp_announce = 0\n"
    outputs = {LIVE: "0\n", BOOT: listing({VENDOR: text})}
    resources = []
    for name, value in (("net.ipv4.conf.all.arp_ignore", 1), ("net.ipv4.conf.all.arp_announce", 2)):
        outcome = ResourceOutcome("sysctl", f"sysctl[{name}]", "site.yml:1", "play")
        resources.append(plan.ResourcePlan(outcome, fix("sysctl", {"name": name, "value": value}, outputs)))
    alone = _writes(resources[0].steps)[0].diff
    assert alone is not None and "+net.ipv4.conf.all.arp_ignore = 1" in alone.splitlines()
    plan.merge_writes(resources)
    merged = _writes(resources[0].steps)[0].diff
    assert merged is not None
    lines = merged.splitlines()
    assert {"-net.ipv4.conf.all.arp_ignore = 0", "+net.ipv4.conf.all.arp_ignore = 1",
            "-net.ipv4.conf.all.arp_announce = 0", "+net.ipv4.conf.all.arp_announce = 2"} <= set(lines)


def test_a_long_diff_is_cut_and_counted_and_binary_is_only_named() -> None:
    long = text_diff("/etc/x", "".join(f"{n}\n" for n in range(100)), "".join(f"{n}!\n" for n in range(100)))
    assert len(long.splitlines()) == DIFF_LINES + 1 and long.splitlines()[-1].endswith("more diff lines")
    assert text_diff("/etc/x", b"\xff\xfe", b"a") == "content differs (binary)"
    assert text_diff("/etc/x", "a\n", "a") == "content differs (line endings or final newline)"


def test_a_netplan_file_holding_a_secret_is_shown_by_line_counts_only() -> None:
    # Netplan files carry Wi-Fi passwords and WireGuard keys (why netplan makes them 0600): the MTU edit
    # must not print the neighbouring key as diff context.
    secret = "aGVsbG8taS1hbS1hLXdpcmVndWFyZC1wcml2YXRlLWtleQ="
    netplan = ("network:\n  version: 2\n  ethernets:\n    eth1:\n      mtu: 1500\n  tunnels:\n    wg0:\n"
               f"      mode: wireguard\n      keys:\n        private: {secret}\n")
    steps = fix("interface", {"name": "eth1", "mtu": 9000, "persistent": True},
                {"ip -j -d link show": IP_LINK, "/etc/netplan/": listing({"/etc/netplan/50-wg.yaml": netplan})})
    [write] = _writes(steps)
    assert write.diff is not None and secret not in write.diff
    assert write.diff.startswith("content differs (sensitive, not shown): 10 lines on the host")
    wifi = text_diff("/etc/netplan/60-wifi.yaml", "wifis:\n  wlan0:\n    password: \"hunter22\"\n    mtu: 1500\n",
                     "wifis:\n  wlan0:\n    password: \"hunter22\"\n    mtu: 9000\n")
    assert "hunter22" not in wifi and "sensitive, not shown" in wifi
