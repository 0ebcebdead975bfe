"""`fabnet lab up / status / down`: build a lab of SSH-reachable virtual GPU nodes, report it, remove it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from provisioner.errors import LabError
from provisioner.lab import network, node, nodepython, rootfs, slurm
from provisioner.lab.delay import DelayConfig
from provisioner.lab.emulation import ofed_install
from provisioner.lab.naming import MAX_NODES, check_lab_name, node_name
from provisioner.lab.profile import DEFAULT_PROFILE, Profile, load_profile
from provisioner.lab.state import LabState, NodeRecord, all_labs, free_slot, labs_root, machine_lock
from provisioner.lab.system import mounts_under, pid_alive, require_root_and_tools, run, write_atomic

Log = Callable[[str], None]
INOTIFY = Path("/proc/sys/fs/inotify/max_user_instances")
# Each booted container holds a few inotify instances; the kernel default of 128 runs out near 22 nodes.
INOTIFY_WANTED = 8192
SSH_READY_TIMEOUT = 90.0
# What playbooks need to know about a lab node's hardware; the profile's files are rendered with these.
LAB_PLAYBOOK_VARS = {"data_iface": "eth1", "rdma_device": "mlx5_0"}


@dataclass(frozen=True)
class NodeStatus:
    name: str
    mgmt_ip: str
    data_iface: str
    data_ip: str
    netns: str
    running: bool
    ssh_ready: bool


def up(name: str, nodes: int | None = None, profile_path: Path | None = None, log: Log = lambda m: None,
       rtt_ms: float = 0.0, share_python: bool = True, with_slurm: bool = False) -> LabState:
    """Create lab `name` with `nodes` nodes from the profile; returns once every node answers SSH.

    `rtt_ms` (and a node's `mgmt_rtt_ms` in the profile) delays the management path: see `delay.py`.
    `share_python`: make this virtualenv's packages (torch, for `fabnet smoke`) usable on every node,
    read-only, through the interpreter the inventory names in `fabnet_python` (see nodepython.py).
    `with_slurm`: a Slurm cluster over the nodes (see slurm.py); returns once its daemons listen.
    """
    check_lab_name(name)
    require_root_and_tools()
    profile = load_profile(profile_path)
    count = nodes or profile.nodes_default
    if not 1 <= count <= MAX_NODES:
        raise LabError(f"--nodes must be between 1 and {MAX_NODES}")
    existing = LabState.load(name)
    if existing is not None:
        raise LabError(f"lab {name!r} already exists: run `fabnet lab down --name {name}` first")

    with machine_lock():
        base = rootfs.ensure_rootfs(log)
        shared_site = nodepython.host_site_packages(base) if share_python else None
        layers = [slurm.ensure_layer(base, log)] if with_slurm else []
        state = LabState(name=name, slot=free_slot(), profile=str(profile_path or DEFAULT_PROFILE),
                         slurm=with_slurm)
        names = state.names
        state.nodes = [
            NodeRecord(index=i, name=node_name(i), netns=names.netns(i), mgmt_ip=names.mgmt_ip(i),
                       data_ip=names.data_ip(i))
            for i in range(1, count + 1)
        ]
        # Recorded before anything is created: a lab killed from here on can still be torn down.
        state.dir.mkdir(parents=True, exist_ok=True)
        state.save()  # under the lock: a lab started right after sees this slot taken
    started = time.monotonic()
    try:
        _raise_inotify_limit(state)
        nodes_dir = state.dir / "nodes"
        nodes_dir.mkdir(exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", "mode=0755", f"fabnet-{name}", str(nodes_dir)])
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fabnet-lab-{name}", "-f", str(state.key_path)])
        public_key = state.key_path.with_suffix(".pub").read_text()
        if with_slurm:
            write_atomic(state.dir / "munge.key", "", mode=0o600)
            (state.dir / "munge.key").write_bytes(slurm.munge_key())
            slurm_conf = slurm.slurm_conf(name, state.nodes, os.cpu_count() or 1)
        network.create_bridges(names)
        _start_delay(state, profile, rtt_ms, log)
        log(f"preparing {count} nodes")

        def prepare(record: NodeRecord) -> str:
            node_state = profile.node_state(record.name)
            network.create_node_network(names, record.index, node_state.data_mtu, node_state.data_link_up)
            network.set_sysctls(record.netns, node_state.sysctls)
            node_dir = state.node_dir(record.index)
            root = node.mount_root(node_dir, base, layers)
            if shared_site is not None:
                nodepython.prepare_root(root)
            host_key = node.prepare_root(root, record, node_state, public_key, names, state.nodes)
            if with_slurm:
                slurm.prepare_root(root, record, state.nodes, slurm_conf, (state.dir / "munge.key").read_bytes())
            return host_key

        with ThreadPoolExecutor(max_workers=min(8, count)) as pool:
            host_keys = list(pool.map(prepare, state.nodes))
        for record in state.nodes:
            record.pid = node.spawn(record, state.node_dir(record.index) / "root", name,
                                    state.node_dir(record.index) / "console.log",
                                    extra_args=nodepython.nspawn_args(shared_site) if shared_site else ())
            state.save()
        extra_vars = {"fabnet_python": nodepython.PYTHON_IN_NODE} if shared_site else {}
        if with_slurm:
            extra_vars[slurm.CONTROLLER_VAR] = state.nodes[0].name
        _write_access_files(state, profile, host_keys, extra_vars)
        log(f"booting {count} nodes")
        wait_for_ssh(state)
        if with_slurm:
            _wait_for_ports(slurm.ports(state.nodes), "Slurm daemons")
        state.complete = True
        state.save()
        log(f"lab {name!r} up: {count} nodes in {time.monotonic() - started:.1f} s")
    except BaseException:
        # Leave nothing half-built behind, also on Ctrl-C.
        down(name)
        raise
    return state


def _start_delay(state: LabState, profile: Profile, rtt_ms: float, log: Log) -> None:
    """Start the management path's delay line when the lab or any node has a round-trip time."""
    per_node = {}
    for record in state.nodes:
        own = profile.node_state(record.name).mgmt_rtt_ms
        if own is not None and own != rtt_ms:
            per_node[record.mgmt_ip] = own
    if rtt_ms <= 0 and not any(ms > 0 for ms in per_node.values()):
        return
    names = state.names
    network.create_delay_path(names)
    config = DelayConfig(names.rtt_tun, names.rtt_netns, "rtt0", rtt_ms, per_node)
    write_atomic(state.delay_config_path, config.to_json())
    log_path = state.dir / "delay.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "provisioner.lab.delay", str(state.delay_config_path)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    write_atomic(state.delay_pid_path, f"{proc.pid}\n")
    carrier = Path("/sys/class/net") / names.rtt_tun / "carrier"
    deadline = time.monotonic() + 10
    # The host's TUN has carrier once the delay line holds it.
    while not (carrier.exists() and carrier.read_text().strip() == "1"):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-800:]
            raise LabError(f"the management delay line did not start:\n{tail}")
        time.sleep(0.02)
    differ = f" ({len(per_node)} nodes differ)" if per_node else ""
    log(f"management path round-trip time {rtt_ms:g} ms{differ}")


def _raise_inotify_limit(state: LabState) -> None:
    try:
        current = int(INOTIFY.read_text())
    except (OSError, ValueError):
        return
    if current < INOTIFY_WANTED:
        previous = [lab.inotify_before for lab in all_labs() if lab.inotify_before is not None]
        state.inotify_before = previous[0] if previous else current
        state.save()
        INOTIFY.write_text(str(INOTIFY_WANTED))


def _write_access_files(state: LabState, profile: Profile, host_keys: list[str],
                        extra_vars: dict[str, str] | None = None) -> None:
    known = "".join(f"{record.mgmt_ip} {key}\n" for record, key in zip(state.nodes, host_keys, strict=True))
    write_atomic(state.known_hosts_path, known)
    inventory = {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(state.key_path),
                "fabnet_known_hosts": str(state.known_hosts_path),
                # Lets Ansible and plain ssh use the same strict host-key file as fabnet.
                "ansible_ssh_common_args": (
                    f"-o UserKnownHostsFile={state.known_hosts_path} -o StrictHostKeyChecking=yes"
                ),
                **LAB_PLAYBOOK_VARS,
                # How `fabnet apply` "installs" OFED on a lab node (the stand-in for a site's installer).
                "fabnet_ofed_install_command": ofed_install.INSTALL_COMMAND,
                "fabnet_sysfs_root": node.HW_ROOT_IN_NODE + "/sys",
                "fabnet_lab": state.name,
                **(extra_vars or {}),
            },
            "children": {
                "gpu": {
                    "hosts": {
                        record.name: {"ansible_host": record.mgmt_ip, "data_ip": record.data_ip}
                        for record in state.nodes
                    }
                }
            },
        }
    }
    header = (f"# Inventory of fabnet lab {state.name!r} (written by `fabnet lab up`; removed by `lab down`).\n"
              f"# Profile: {state.profile}\n")
    write_atomic(state.inventory_path, header + yaml.safe_dump(inventory, sort_keys=False))


def _ssh_banner(ip: str, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((ip, 22), timeout=timeout) as sock:
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def wait_for_ssh(state: LabState, records: list[NodeRecord] | None = None) -> None:
    """Wait until each of `records` (default: every node) answers with an SSH banner."""
    deadline = time.monotonic() + SSH_READY_TIMEOUT
    pending = list(state.nodes if records is None else records)
    while pending:
        for record in list(pending):
            if record.pid is not None and not pid_alive(record.pid):
                console = state.node_dir(record.index) / "console.log"
                tail = console.read_text(errors="replace")[-800:] if console.exists() else ""
                raise LabError(f"node {record.name}'s container exited during boot:\n{tail}")
            if _ssh_banner(record.mgmt_ip):
                pending.remove(record)
        if pending and time.monotonic() > deadline:
            raise LabError("nodes not answering SSH after boot: " + ", ".join(r.name for r in pending))
        if pending:
            time.sleep(0.1)


def _wait_for_ports(addresses: list[tuple[str, int]], what: str) -> None:
    deadline = time.monotonic() + SSH_READY_TIMEOUT
    pending = list(addresses)
    while pending:
        for address in list(pending):
            try:
                socket.create_connection(address, timeout=0.5).close()
                pending.remove(address)
            except OSError:
                pass
        if pending and time.monotonic() > deadline:
            raise LabError(f"{what} not listening after boot: " + ", ".join(f"{ip}:{port}" for ip, port in pending))
        if pending:
            time.sleep(0.2)


def status(name: str) -> tuple[LabState, list[NodeStatus]]:
    state = LabState.load(check_lab_name(name))
    if state is None:
        raise LabError(f"no lab named {name!r} (labs: {', '.join(lab.name for lab in all_labs()) or 'none'})")
    with ThreadPoolExecutor(max_workers=16) as pool:
        ready = list(pool.map(lambda r: _ssh_banner(r.mgmt_ip, 0.5), state.nodes))
    nodes = [
        NodeStatus(r.name, r.mgmt_ip, r.data_iface, r.data_ip, r.netns,
                   running=r.pid is not None and pid_alive(r.pid), ssh_ready=ok)
        for r, ok in zip(state.nodes, ready, strict=True)
    ]
    return state, nodes


def down(name: str, log: Log = lambda m: None) -> bool:
    """Remove everything lab `name` created; safe to repeat, and works on half-built labs.

    Returns whether anything was found to remove.
    """
    check_lab_name(name)
    state = LabState.load(name)
    lab_dir = labs_root() / name
    found = state is not None or lab_dir.exists()

    # 1. Processes: every container process sits in the lab's cgroups.
    for directory in node.cgroup_dirs(name):
        if directory.is_dir():
            found = True
            node.kill_cgroup(directory)
    pids = [r.pid for r in (state.nodes if state else []) if r.pid]
    if state is not None and state.delay_pid:
        pids.append(state.delay_pid)
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        alive = [p for d in node.cgroup_dirs(name) for p in node.cgroup_pids(d)] + [p for p in pids if pid_alive(p)]
        for pid in pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if not alive:
            break
        time.sleep(0.05)
    # 2. Mounts (overlays first, then the tmpfs under them).
    for target in mounts_under(lab_dir):
        found = True
        if run(["umount", target], check=False).returncode != 0:
            run(["umount", "-l", target], check=False)
    # 3. Network.
    if state is not None:
        network.remove_network(state.names)
    for netns in network.lab_namespaces(name):
        found = True
        run(["ip", "netns", "del", netns], check=False)
    # 4. Cgroups, files, and the inotify limit once no lab needs it.
    for directory in node.cgroup_dirs(name):
        node.remove_cgroup_tree(directory)
    inotify_before = state.inotify_before if state else None
    if lab_dir.exists():
        shutil.rmtree(lab_dir, ignore_errors=True)
    others = all_labs()
    if inotify_before is not None and not others:
        try:
            INOTIFY.write_text(str(inotify_before))
        except OSError:
            pass
    if found:
        log(f"lab {name!r} removed")
    return found

