"""Read-only pyinfra version of `fabnet audit -p playbooks/site.yml`, for the benchmark.

Run with `pyinfra INVENTORY site.py fleet.py --dry` from this folder. Each `read` is one fact (one SSH
exec) running the same command on the node as one of fabnet's probes; each `check` is an operation
that is a noop when in sync and "would change" when drifted, under the same names fabnet reports.
The comparisons are simpler than fabnet's (boot-time MTU only from systemd-networkd files, the last
sysctl assignment in the listing wins); on the lab they find the same drift, which the harness checks.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import labcheck as lc
from pyinfra import host

iface = host.data.data_iface
sysfs = host.data.get("sysfs_root", "/sys")
template_vars = {"data_iface": iface, "rdma_device": host.data.rdma_device}

# ----------------------------------------------------------------------- reads: one fact per fabnet probe
ip_link = lc.read("ip -j -d link show")
net_boot = lc.read(lc.listing(
    "/etc/netplan/*.yaml", "/etc/netplan/*.yml", "/etc/systemd/network/*.network",
    "/etc/systemd/network/*.link", "/etc/NetworkManager/system-connections/*",
    "/etc/sysconfig/network-scripts/ifcfg-*", "/etc/network/interfaces", "/etc/network/interfaces.d/*",
))
services = {
    name: lc.systemctl_show(lc.read(
        f"systemctl show --property=LoadState,ActiveState,SubState,UnitFileState,MainPID -- {name}.service"
    ))
    for name in ("rdma_cm", "openibd")
}
lsmod = lc.read("lsmod")
modules_boot = lc.read(lc.listing(
    "/etc/modules-load.d/*.conf", "/run/modules-load.d/*.conf", "/usr/lib/modules-load.d/*.conf", "/etc/modules",
))
arp_ignore = lc.read("cat -- /proc/sys/net/ipv4/conf/all/arp_ignore")
sysctl_boot = lc.read(lc.listing(
    "/etc/sysctl.d/*.conf", "/run/sysctl.d/*.conf", "/usr/local/lib/sysctl.d/*.conf", "/usr/lib/sysctl.d/*.conf",
    "/etc/sysctl.conf",
))
arp_announce = lc.read("cat -- /proc/sys/net/ipv4/conf/all/arp_announce")
ofed = lc.read("ofed_info -s")
nccl = lc.read(
    "s=$(dpkg-query -W '-f=${Status} ${Version}\\n' -- libnccl2 2>/dev/null); "
    "case \"$s\" in *\" ok installed \"*) printf 'dpkg %s\\n' \"${s##* }\";; *) echo files; "
    "for f in /usr/lib/x86_64-linux-gnu/libnccl.so.* /usr/lib64/libnccl.so.* /usr/local/lib/libnccl.so.* "
    "/usr/lib/aarch64-linux-gnu/libnccl.so.*; do if [ -e \"$f\" ]; then echo \"$f\"; fi; done;; esac"
)
qos = lc.read(lc.qos_read(iface, sysfs))
ecn = lc.read(
    f"grep -r -H . -- {sysfs}/class/net/{iface}/ecn/roce_np/enable {sysfs}/class/net/{iface}/ecn/roce_rp/enable"
)
cnp_dscp = lc.read(f"cat -- {sysfs}/class/net/{iface}/ecn/roce_np/cnp_dscp")
traffic_class = lc.read(lc.rdma_dev_of(iface, sysfs) + f'cat -- {sysfs}/class/infiniband/"$dev"/tc/1/traffic_class')
devinfo = lc.read(lc.rdma_dev_of(iface, sysfs) + 'ibv_devinfo -v -d "$dev"')
show_gids = lc.read(lc.rdma_dev_of(iface, sysfs) + 'show_gids "$dev"')
nccl_conf = lc.read(lc.file_probe("/etc/nccl.conf"))
nccl_sh = lc.read(lc.file_probe("/etc/profile.d/nccl.sh"))

# ------------------------------------------------------------------------------------------ compare
link = lc.link_of(ip_link, iface)
mtu = link.get("mtu")
lc.FLEET_MTU[host.name] = mtu
link_state = "up" if "UP" in link.get("flags", []) else "down"
boot_mtu = lc.boot_mtu(net_boot, iface)
loaded = [line.split()[0].replace("-", "_") for line in (lsmod or "").splitlines()[1:] if line.strip()]
listed = lc.first(r"^\s*(nvidia_peermem)\s*$", modules_boot) == "nvidia_peermem"
ofed_version = lc.first(r"^\D*(\S+?):?$", ofed, "not installed")
nccl_version = lc.first(r"^dpkg (\S+)", nccl, "not installed")
trust, pfc, dscp_map = lc.qos_facts(qos)
dscp26, dscp48 = dscp_map.get(26, "none"), dscp_map.get(48, "none")
ecn_np, ecn_rp = lc.ecn_on(ecn, "roce_np"), lc.ecn_on(ecn, "roce_rp")
tclass = lc.first(r"tclass=(\d+)", traffic_class, "unset")
cnp = (cnp_dscp or "").strip()
port_state = lc.first(r"state:\s+PORT_(\w+)", devinfo, "unknown").lower()
active_mtu = lc.first(r"active_mtu:\s+(\d+)", devinfo, "unknown")
gid_type = lc.first(r"GID\[\s*3\]:\s+[^,\n]+, (RoCE v\d)", devinfo, "")
if not gid_type:
    gid_type = "RoCE " + lc.first(r"^\S+\s+1\s+3\s.*\s(v\d)\s+\S+\s*$", show_gids)
enabled_states = {"enabled", "enabled-runtime", "static", "generated", "alias"}

checks = [
    (f"interface[{iface}].mtu", 9000, mtu, mtu == 9000),
    (f"interface[{iface}].link", "up", link_state, link_state == "up"),
    (f"interface[{iface}].mtu_persistent", "9000", boot_mtu, boot_mtu == "9000"),
]
for name, show in services.items():
    active = show.get("ActiveState", "unknown")
    enabled = show.get("UnitFileState", "unknown")
    checks += [
        (f"service[{name}].active", "active", active, active in ("active", "reloading")),
        (f"service[{name}].enabled", "enabled", enabled, enabled in enabled_states),
    ]
checks += [
    ("kernel_module[nvidia_peermem].loaded", "loaded", "nvidia_peermem" in loaded, "nvidia_peermem" in loaded),
    ("kernel_module[nvidia_peermem].persistent", "listed", listed, listed),
]
for name, live, want in (
    ("net.ipv4.conf.all.arp_ignore", arp_ignore, "1"),
    ("net.ipv4.conf.all.arp_announce", arp_announce, "2"),
):
    boot = lc.boot_sysctl(sysctl_boot, name)
    checks += [
        (f"sysctl[{name}].value", want, (live or "").strip(), (live or "").strip() == want),
        (f"sysctl[{name}].persistent", want, boot, boot == want),
    ]
checks += [
    ("ofed.version", ">=23.10", ofed_version, lc.version_key(ofed_version)[:2] >= [23, 10]),
    ("nccl[libnccl2].version", "==2.21.5", nccl_version, lc.version_key(nccl_version)[:3] == [2, 21, 5]),
    (f"roce_qos[{iface}].trust", "dscp", trust, trust == "dscp"),
    (f"roce_qos[{iface}].pfc", "3", pfc, pfc == "3"),
    (f"roce_qos[{iface}].dscp2prio[26]", "3", dscp26, dscp26 == "3"),
    (f"roce_qos[{iface}].dscp2prio[48]", "6", dscp48, dscp48 == "6"),
    (f"roce_qos[{iface}].ecn", "3", f"np {ecn_np} rp {ecn_rp}", ecn_np == ecn_rp == "3"),
    (f"roce_qos[{iface}].cnp_dscp", "48", cnp, cnp == "48"),
    (f"roce_qos[{iface}].traffic_class", "106", tclass, tclass == "106"),
    (f"roce_qos[{iface}].port_state", "active", port_state, port_state == "active"),
    (f"roce_qos[{iface}].active_mtu", "4096", active_mtu, active_mtu == "4096"),
    (f"roce_qos[{iface}].gid_index", "RoCE v2", gid_type, gid_type == "RoCE v2"),
]
checks += lc.file_checks("/etc/nccl.conf", nccl_conf, lc.render("nccl.conf.j2", template_vars))
checks += lc.file_checks("/etc/profile.d/nccl.sh", nccl_sh, lc.render("nccl-env.sh.j2", template_vars))

# A missing file has one check instead of five: pad so every host adds the same operations in order.
present = {key for key, *_ in checks}
for path in ("/etc/nccl.conf", "/etc/profile.d/nccl.sh"):
    for attribute in ("content", "mode", "owner", "group"):
        key = f"file[{path}].{attribute}"
        if key not in present:
            checks.append((key, "-", "file missing", True))

for key, want, have, ok in sorted(checks):
    lc.check(name=f"check {key}", key=key, want=want, have=have, ok=ok)
