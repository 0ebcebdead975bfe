"""`fabnet lab add`: new nodes join a running lab the way new servers join a fleet.

They come with the vendor's defaults (profiles/vendor-default.yml: MTU 1500, no QoS, no NCCL), on the
same management and data bridges as the lab's nodes, and with fresh host keys that are deliberately
NOT written to the lab's known_hosts: trusting them is `fabnet bootstrap`'s first step. The inventory
lists them in the playbook's group (`gpu`) and in `new`, so `--limit new` picks them out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import yaml

from provisioner.errors import LabError
from provisioner.lab import network, node, nodepython, rootfs
from provisioner.lab.naming import MAX_NODES, check_lab_name, node_name
from provisioner.lab.profile import DEFAULT_PROFILE, load_profile
from provisioner.lab.state import LabState, NodeRecord
from provisioner.lab.system import mounts_under, pid_alive, require_root_and_tools, run, write_atomic

Log = Callable[[str], None]
VENDOR_PROFILE = DEFAULT_PROFILE.with_name("vendor-default.yml")
NEW_GROUP = "new"
FLEET_GROUP = "gpu"  # the group playbooks/site.yml targets


def add(name: str, count: int = 1, log: Log = lambda m: None,
        profile_path: Path | None = None) -> list[NodeRecord]:
    """Add `count` vendor-default nodes to the running lab `name`; returns them once they answer SSH.

    Nodes are numbered on from the lab's last one. A failure removes the nodes this call added (and
    only those); the lab's other nodes are not touched.
    """
    from provisioner.lab import manager

    check_lab_name(name)
    require_root_and_tools()
    state = LabState.load(name)
    if state is None or not state.complete:
        raise LabError(f"no running lab named {name!r}: start one with `fabnet lab up --name {name}`")
    last = max((r.index for r in state.nodes), default=0)
    if count < 1 or last + count > MAX_NODES:
        raise LabError(f"a lab has at most {MAX_NODES} nodes ({len(state.nodes)} now); cannot add {count}")
    profile = load_profile(profile_path or VENDOR_PROFILE)
    names = state.names
    added = [NodeRecord(index=i, name=node_name(i), netns=names.netns(i), mgmt_ip=names.mgmt_ip(i),
                        data_ip=names.data_ip(i)) for i in range(last + 1, last + count + 1)]
    inventory_before = state.inventory_path.read_text()
    shares_python = "fabnet_python" in (yaml.safe_load(inventory_before) or {}).get("all", {}).get("vars", {})
    # Recorded before anything is created, as `up` does: `lab down` removes them whatever happens next.
    state.nodes.extend(added)
    state.save()
    started = time.monotonic()
    try:
        base = rootfs.ensure_rootfs(log)
        shared_site = nodepython.host_site_packages(base) if shares_python else None
        public_key = state.key_path.with_suffix(".pub").read_text()
        log(f"preparing {count} vendor-default node{'s' if count > 1 else ''}")
        for record in added:
            node_state = profile.node_state(record.name)
            network.create_node_network(names, record.index, node_state.data_mtu, node_state.data_link_up)
            network.set_sysctls(record.netns, node_state.sysctls)
            root = node.mount_root(state.node_dir(record.index), base)
            if shared_site is not None:
                nodepython.prepare_root(root)
            # The host key it returns is left out of known_hosts on purpose (see the module's docstring).
            node.prepare_root(root, record, node_state, public_key, names, state.nodes)
        for record in added:
            record.pid = node.spawn(record, state.node_dir(record.index) / "root", name,
                                    state.node_dir(record.index) / "console.log",
                                    extra_args=nodepython.nspawn_args(shared_site) if shared_site else ())
            state.save()
        write_atomic(state.inventory_path, with_new_hosts(inventory_before, added))
        manager.wait_for_ssh(state, added)
    except BaseException:
        _remove(state, added, inventory_before)
        raise
    log(f"lab {name!r}: added {', '.join(r.name for r in added)} in {time.monotonic() - started:.1f} s "
        "(host keys not yet trusted: see `fabnet bootstrap`)")
    return added


def with_new_hosts(inventory_text: str, added: list[NodeRecord]) -> str:
    """The lab inventory with `added` in the fleet's group (with their addresses) and in `new` (pure).

    The comment lines at the top of the file are kept.
    """
    header = "".join(line + "\n" for line in inventory_text.splitlines() if line.startswith("#"))
    data = yaml.safe_load(inventory_text) or {}
    children = data.setdefault("all", {}).setdefault("children", {})
    fleet = children.setdefault(FLEET_GROUP, {}) or {}
    children[FLEET_GROUP] = fleet
    fleet_hosts = fleet.setdefault("hosts", {}) or {}
    fleet["hosts"] = fleet_hosts
    new = children.setdefault(NEW_GROUP, {}) or {}
    children[NEW_GROUP] = new
    new_hosts = new.setdefault("hosts", {}) or {}
    new["hosts"] = new_hosts
    for record in added:
        fleet_hosts[record.name] = {"ansible_host": record.mgmt_ip, "data_ip": record.data_ip}
        new_hosts[record.name] = None
    return header + yaml.safe_dump(data, sort_keys=False)


def added_nodes(inventory: Path) -> list[str]:
    """The hosts of a lab inventory's `new` group (those `lab add` added)."""
    data = yaml.safe_load(inventory.read_text()) or {}
    group = ((data.get("all") or {}).get("children") or {}).get(NEW_GROUP) or {}
    return list(group.get("hosts") or {})


def _remove(state: LabState, added: list[NodeRecord], inventory_before: str) -> None:
    """Undo a failed `add`: the added nodes' processes, mounts, links and records; nothing else."""
    for record in added:
        for directory in node.cgroup_dirs(state.name, record.name):
            node.kill_cgroup(directory)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        busy = [p for r in added for d in node.cgroup_dirs(state.name, r.name) for p in node.cgroup_pids(d)]
        if not busy and not any(r.pid and pid_alive(r.pid) for r in added):
            break
        time.sleep(0.05)
    names = state.names
    for record in added:
        for target in mounts_under(state.node_dir(record.index)):
            if run(["umount", target], check=False).returncode != 0:
                run(["umount", "-l", target], check=False)
        # Host-side veths first: `ip netns del` finishes in the background (see network.remove_network).
        for link in (names.mgmt_port(record.index), names.data_port(record.index)):
            run(["ip", "link", "del", link], check=False)
        run(["ip", "netns", "del", record.netns], check=False)
        for directory in node.cgroup_dirs(state.name, record.name):
            node.remove_cgroup_tree(directory)
    write_atomic(state.inventory_path, inventory_before)
    gone = {r.index for r in added}
    state.nodes = [r for r in state.nodes if r.index not in gone]
    state.save()
