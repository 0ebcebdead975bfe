"""The lab's networks: one management bridge (SSH) and one data bridge (the 'switch') on the host,
and per node a network namespace holding `eth0` (management) and `eth1` (data) veth ends.
"""

from __future__ import annotations

from provisioner.errors import LabError
from provisioner.lab.naming import LabNames
from provisioner.lab.system import run

# The switch ports carry jumbo frames; a test lowers one port's MTU to make a 1500-byte hop.
SWITCH_PORT_MTU = 9216


def link_exists(name: str, netns: str | None = None) -> bool:
    args = ["ip"] + (["-n", netns] if netns else []) + ["link", "show", "dev", name]
    return run(args, check=False).returncode == 0


def create_bridges(names: LabNames) -> None:
    for bridge in (names.mgmt_bridge, names.data_bridge):
        if not link_exists(bridge):
            run(["ip", "link", "add", bridge, "type", "bridge"])
        run(["ip", "link", "set", bridge, "mtu", str(SWITCH_PORT_MTU)], check=False)
    # The host talks to nodes over the management bridge only; the data bridge has no host address.
    run(["ip", "addr", "replace", f"{names.mgmt_gateway}/24", "dev", names.mgmt_bridge])
    for bridge in (names.mgmt_bridge, names.data_bridge):
        run(["ip", "link", "set", bridge, "up"])


def create_node_network(names: LabNames, index: int, data_mtu: int, data_up: bool) -> None:
    netns = names.netns(index)
    if run(["ip", "netns", "add", netns], check=False).returncode != 0:
        run(["ip", "netns", "del", netns], check=False)
        run(["ip", "netns", "add", netns])
    ns = ["ip", "-n", netns]
    for kind, host_end, node_end, bridge, mac in (
        (1, names.mgmt_port(index), "eth0", names.mgmt_bridge, names.mac(1, index)),
        (2, names.data_port(index), "eth1", names.data_bridge, names.mac(2, index)),
    ):
        if link_exists(host_end):
            run(["ip", "link", "del", host_end])
        run(["ip", "link", "add", host_end, "address", names.mac(kind + 2, index), "type", "veth",
             "peer", "name", node_end, "address", mac, "netns", netns])
        run(["ip", "link", "set", host_end, "mtu", str(SWITCH_PORT_MTU), "master", bridge, "up"])
    run([*ns, "link", "set", "lo", "up"])
    run([*ns, "addr", "add", f"{names.mgmt_ip(index)}/24", "dev", "eth0"])
    run([*ns, "link", "set", "eth0", "up"])
    run([*ns, "addr", "add", f"{names.data_ip(index)}/24", "dev", "eth1"])
    run([*ns, "link", "set", "eth1", "mtu", str(data_mtu)])
    run([*ns, "link", "set", "eth1", "up" if data_up else "down"])


def create_delay_path(names: LabNames) -> None:
    """Route the host's management traffic through the delay line (see `delay.py`): the host's .254 moves
    from the bridge to a TUN device, and a router namespace on the bridge answers ARP for it."""
    ns = names.rtt_netns
    if run(["ip", "netns", "add", ns], check=False).returncode != 0:
        run(["ip", "netns", "del", ns], check=False)
        run(["ip", "netns", "add", ns])
    if link_exists(names.rtt_port):
        run(["ip", "link", "del", names.rtt_port])
    run(["ip", "link", "add", names.rtt_port, "address", names.mac(5, 0), "type", "veth",
         "peer", "name", "eth0", "address", names.mac(6, 0), "netns", ns])
    run(["ip", "link", "set", names.rtt_port, "mtu", str(SWITCH_PORT_MTU), "master", names.mgmt_bridge, "up"])
    ip = ["ip", "-n", ns]
    run([*ip, "link", "set", "lo", "up"])
    run([*ip, "addr", "add", f"{names.mgmt_router}/24", "dev", "eth0"])
    run([*ip, "link", "set", "eth0", "up"])
    run([*ip, "tuntap", "add", "dev", "rtt0", "mode", "tun"])
    run([*ip, "link", "set", "rtt0", "mtu", "1500", "up"])
    run([*ip, "route", "add", f"{names.mgmt_gateway}/32", "dev", "rtt0"])
    run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
         "net.ipv4.conf.eth0.proxy_arp=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0",
         "net.ipv4.conf.rtt0.rp_filter=0", "net.ipv6.conf.all.disable_ipv6=1"])
    run(["ip", "addr", "del", f"{names.mgmt_gateway}/24", "dev", names.mgmt_bridge], check=False)
    # The host would otherwise answer ARP for .254 on the bridge (its address, on another device) and
    # the nodes' replies would bypass the delay line.
    run(["sysctl", "-q", "-w", f"net.ipv4.conf.{names.mgmt_bridge}.arp_ignore=8"])
    if link_exists(names.rtt_tun):
        run(["ip", "link", "del", names.rtt_tun])
    run(["ip", "tuntap", "add", "dev", names.rtt_tun, "mode", "tun"])
    run(["sysctl", "-q", "-w", f"net.ipv6.conf.{names.rtt_tun}.disable_ipv6=1"], check=False)
    run(["ip", "link", "set", names.rtt_tun, "mtu", "1500", "up"])
    run(["ip", "addr", "replace", f"{names.mgmt_gateway}/24", "dev", names.rtt_tun])


def set_sysctls(netns: str, values: dict[str, str]) -> None:
    """Live values of per-namespace (net.*) sysctls; a node's /etc/sysctl.d holds the boot-time ones.

    systemd-sysctl does not run in the containers (their /proc/sys is read-only outside net.*), so the
    lab applies the starting values itself.
    """
    for key, value in values.items():
        if not key.startswith("net."):
            raise LabError(f"lab nodes can only have net.* sysctls (got {key})")
        run(["ip", "netns", "exec", netns, "sysctl", "-q", "-w", f"{key}={value}"])


def lab_links(names: LabNames) -> list[str]:
    """Host-side links whose names carry this lab's prefix (bridges and veth ends)."""
    out = run(["ip", "-o", "link", "show"], check=False).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            name = parts[1].strip().split("@", 1)[0]
            if name.startswith(names.prefix + "-"):
                found.append(name)
    return found


def lab_namespaces(lab: str) -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    names = (line.split()[0] for line in out.splitlines() if line.strip())
    return [name for name in names if name.startswith(f"fabnet-{lab}-")]


def remove_network(names: LabNames) -> None:
    # Delete host-side veths explicitly: `ip netns del` tears namespaces down asynchronously, and an
    # immediate rebuild would otherwise meet "File exists".
    for link in sorted(lab_links(names), key=lambda n: n.endswith(("-mgmt", "-data"))):
        run(["ip", "link", "del", link], check=False)
    for netns in lab_namespaces(names.lab):
        run(["ip", "netns", "del", netns], check=False)
