"""One lab node: its own root (an overlay over the shared rootfs), identity, emulated hardware state,
and a systemd-nspawn container booted inside the node's network namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from provisioner.errors import LabError
from provisioner.lab import emulation, nodepython
from provisioner.lab.naming import LabNames
from provisioner.lab.profile import NodeState
from provisioner.lab.rootfs import OPERATOR, REPO_IN_NODE, cache_dir
from provisioner.lab.state import NodeRecord
from provisioner.lab.system import run, write_atomic

HW_ROOT_IN_NODE = "/var/lib/fabnet-lab"
LABHW_IN_NODE = emulation.INSTALL_PATH
LABHW_SOURCE = emulation.LABHW_SOURCE
WANTS = "etc/systemd/system/multi-user.target.wants"


def cgroup_dirs(lab: str, node: str | None = None) -> list[Path]:
    """Where a node's container lives in each cgroup hierarchy this host mounts."""
    base = Path("/sys/fs/cgroup")
    roots = [base / "unified", base / "systemd"] if (base / "unified").is_dir() else [base]
    tail = Path("fabnet") / lab / (node or "")
    return [root / tail for root in roots if root.is_dir()]


def mount_root(node_dir: Path, rootfs: Path, layers: Sequence[Path] = ()) -> Path:
    """Mount the node's overlay; the upper layer lives on the lab's tmpfs, so `down` discards it.

    `layers`: cached layers over the rootfs (the Slurm packages), topmost first.
    """
    upper, work, merged = node_dir / "upper", node_dir / "work", node_dir / "root"
    for path in (upper, work, merged):
        path.mkdir(parents=True, exist_ok=True)
    lower = ":".join(str(path) for path in [*layers, rootfs])
    run(["mount", "-t", "overlay", "overlay", "-o",
         f"lowerdir={lower},upperdir={upper},workdir={work}", str(merged)])
    return merged


def hw_json(state: NodeState, index: int) -> dict:
    qos = state.qos
    return {
        "ofed": state.ofed,
        "gpus": {"count": state.gpus, "model": state.gpu_model},
        "hcas": [{
            "name": "mlx5_0", "port": 1, "netdev": "eth1", "ca_type": "MT4129", "fw_ver": "28.39.2048",
            "vendor_part_id": 4129, "board_id": "MT_0000000838",
            "node_guid": f"58a2:e103:00{index >> 8:02x}:{index & 0xFF:02x}b8", "rate": 400,
        }],
        "modules": {name: loaded for name, loaded in state.modules.items()},
        "qos": {"eth1": {"trust": qos.trust, "pfc": [1 if p in qos.pfc else 0 for p in range(8)]}},
        "ecn": {"eth1": {"np": [1 if p in qos.ecn else 0 for p in range(8)],
                         "rp": [1 if p in qos.ecn else 0 for p in range(8)],
                         "cnp_dscp": qos.cnp_dscp}},
        "traffic_class": {"mlx5_0": qos.traffic_class},
        "roce_tos": {"mlx5_0": qos.roce_tos},
    }


def prepare_root(root: Path, record: NodeRecord, state: NodeState, public_key: str, names: LabNames,
                 all_nodes: list[NodeRecord]) -> str:
    """Write the node's identity and starting state into its root; returns its host public key."""
    write_atomic(root / "etc/hostname", record.name + "\n")
    hosts = ["127.0.0.1\tlocalhost", f"127.0.1.1\t{record.name}"]
    hosts += [f"{node.data_ip}\t{node.name}-data" for node in all_nodes]
    write_atomic(root / "etc/hosts", "\n".join(hosts) + "\n")
    host_key = root / "etc/ssh/ssh_host_ed25519_key"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{record.name}", "-f", str(host_key)])
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(ssh_dir / "authorized_keys", public_key, mode=0o600)
    _authorize_operator(root, public_key)

    _install_emulation(root, state, record.index)
    _write_port_counters(root / HW_ROOT_IN_NODE.lstrip("/") / "sys", state.port_counters)
    _write_nic_stats(root / HW_ROOT_IN_NODE.lstrip("/") / "sys", state.nic_stats, record.data_iface)
    _set_services(root, state.services)
    _write_network_config(root, record, state, names)
    for path, content in state.files.items():
        target = root / path.lstrip("/")
        if content is None:
            target.unlink(missing_ok=True)
        else:
            write_atomic(target, content)
    loaded = sorted(name for name, on in state.modules.items() if on)
    if loaded:
        # As on a real node: modules wanted at boot are listed for systemd-modules-load.
        write_atomic(root / "etc/modules-load.d/fabnet-lab.conf", "".join(f"{name}\n" for name in loaded))
    if state.sysctls:
        lines = "".join(f"{key} = {value}\n" for key, value in state.sysctls.items())
        write_atomic(root / "etc/sysctl.d/90-fabnet-lab.conf", lines)
    if state.nccl:
        deb = f"{REPO_IN_NODE}/libnccl2_{state.nccl}_amd64.deb"
        run(["chroot", str(root), "dpkg", "-i", deb], timeout=120)
        # As the `nccl` resource leaves a node it installed: held, and pinned to that version.
        run(["chroot", str(root), "apt-mark", "hold", "libnccl2"], timeout=60)
        write_atomic(root / "etc/apt/preferences.d/fabnet-libnccl2",
                     f"Package: libnccl2\nPin: version {state.nccl}\nPin-Priority: 1001\n")
    key_type, key_data = host_key.with_suffix(".pub").read_text().split()[:2]
    return f"{key_type} {key_data}"


def _authorize_operator(root: Path, public_key: str) -> None:
    """The same lab key logs in as the unprivileged operator account (uid from the node's passwd)."""
    entry = next(line.split(":") for line in (root / "etc/passwd").read_text().splitlines()
                 if line.startswith(f"{OPERATOR}:"))
    uid, gid = int(entry[2]), int(entry[3])
    ssh_dir = root / "home" / OPERATOR / ".ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(ssh_dir / "authorized_keys", public_key, mode=0o600)
    for path in (ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(path, uid, gid)


def _install_emulation(root: Path, state: NodeState, index: int) -> None:
    target = root / LABHW_IN_NODE.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(LABHW_SOURCE, target, ignore=shutil.ignore_patterns("__pycache__"))
    runner = emulation.fast_path_binary(cache_dir())
    if runner is not None:
        shutil.copyfile(runner, root / emulation.RUNNER.lstrip("/"))
        os.chmod(root / emulation.RUNNER.lstrip("/"), 0o755)
    for command in emulation.COMMANDS:
        wrapper = root / emulation.WRAPPER_DIR.lstrip("/") / command
        wrapper.unlink(missing_ok=True)
        # The compiled fast path answers, and runs Python only when it must.
        text = emulation.fast_wrapper_script(command) if runner else emulation.wrapper_script(command)
        write_atomic(wrapper, text, mode=0o755)
    shutil.copyfile(emulation.ALL_REDUCE_PERF_SOURCE, root / emulation.ALL_REDUCE_PERF_LIB.lstrip("/"))
    write_atomic(root / emulation.ALL_REDUCE_PERF.lstrip("/"),
                 emulation.all_reduce_perf_wrapper(nodepython.PYTHON_IN_NODE), mode=0o755)
    hw_root = root / HW_ROOT_IN_NODE.lstrip("/")
    write_atomic(hw_root / "hw.json", json.dumps(hw_json(state, index), indent=2) + "\n")
    run([sys.executable, str(LABHW_SOURCE), "--as", "fabnet-lab-init"],
        env={"FABNET_LAB_HW_ROOT": str(hw_root)})


# The counters a ConnectX port has in sysfs: the IB port counters and the mlx5 driver's hw_counters.
PORT_COUNTERS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
    "port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
    "VL15_dropped", "port_xmit_wait", "port_xmit_data", "port_rcv_data", "port_xmit_packets",
    "port_rcv_packets", "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets",
    "multicast_rcv_packets",
)
HW_COUNTERS = (
    "out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
    "duplicate_request", "implied_nak_seq_err", "roce_adp_retrans", "roce_slow_restart", "np_cnp_sent",
    "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored", "req_cqe_error", "resp_cqe_error",
)


def _write_port_counters(sys_root: Path, values: dict[str, int], device: str = "mlx5_0", port: int = 1) -> None:
    """The port's counter files, as `class/infiniband/DEV/ports/N/{counters,hw_counters}/NAME` in sysfs."""
    base = sys_root / "class/infiniband" / device / "ports" / str(port)
    for group, names in (("counters", PORT_COUNTERS), ("hw_counters", HW_COUNTERS)):
        for name in names:
            write_atomic(base / group / name, f"{values.get(name, 0)}\n")
    for name in set(values) - set(PORT_COUNTERS) - set(HW_COUNTERS):
        # A counter this list does not know still exists on some NIC: the profile decides.
        write_atomic(base / "hw_counters" / name, f"{values[name]}\n")


# What an mlx5 port's `ethtool -S` says about lossless Ethernet: buffer drops, pause storms, per-priority pause
# frames, physical errors, link drops, and the totals beside them.
NIC_STATS = (
    "rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_discards_phy", "tx_discards_phy", "rx_crc_errors_phy",
    "rx_symbol_err_phy", "link_down_events_phy", "tx_pause_storm_warning_events", "tx_pause_storm_error_events",
    *(f"{way}_prio{prio}_pause" for prio in range(8) for way in ("rx", "tx")),
)


def _write_nic_stats(sys_root: Path, values: dict[str, int], netdev: str) -> None:
    """The data interface's driver statistics, a file per counter (labhw's `ethtool -S` reads them)."""
    base = sys_root / "class/net" / netdev / "ethtool_stats"
    for name in dict.fromkeys([*NIC_STATS, *values]):
        write_atomic(base / name, f"{values.get(name, 0)}\n")


def _set_services(root: Path, services: dict[str, bool]) -> None:
    wants = root / WANTS
    wants.mkdir(parents=True, exist_ok=True)
    for unit, enabled in services.items():
        unit_name = unit if "." in unit else f"{unit}.service"
        link = wants / unit_name
        if link.is_symlink() or link.exists():
            link.unlink()
        if enabled:
            link.symlink_to(f"/etc/systemd/system/{unit_name}")


def _write_network_config(root: Path, record: NodeRecord, state: NodeState, names: LabNames) -> None:
    """Boot-time config for the data interface, in systemd-networkd's format, as on many GPU images."""
    link = f"\n[Link]\nMTUBytes={state.data_mtu}\n" if state.mtu_persistent else ""
    write_atomic(
        root / "etc/systemd/network/10-data.network",
        f"[Match]\nName={record.data_iface}\n{link}\n[Network]\nAddress={record.data_ip}/24\n",
    )


def spawn(record: NodeRecord, root: Path, lab: str, log_path: Path, extra_args: Sequence[str] = ()) -> int:
    """Boot the node's container in its namespace; returns the systemd-nspawn pid."""
    cgroups = cgroup_dirs(lab, record.name)
    for directory in cgroups:
        directory.mkdir(parents=True, exist_ok=True)

    def join_cgroups() -> None:
        # Each container needs a cgroup of its own: sharing one made a boot hang on this kind of host.
        for directory in cgroups:
            with open(directory / "cgroup.procs", "w") as handle:
                handle.write(str(os.getpid()))

    args = [
        "systemd-nspawn", "--quiet", "-D", str(root), "--boot", "--register=no", "--keep-unit",
        f"--network-namespace-path=/run/netns/{record.netns}", "--capability=CAP_NET_ADMIN",
        "--console=passive", f"--hostname={record.name}", f"--machine=fabnet-{lab}-{record.name}",
        "--link-journal=no", "--resolv-conf=off", "--timezone=off", *extra_args,
    ]
    # Lets the node change its own net.* sysctls, as a real host can; the rest of /proc/sys stays read-only.
    env = {**os.environ, "SYSTEMD_NSPAWN_API_VFS_WRITABLE": "network"}
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                    preexec_fn=join_cgroups, start_new_session=True)
        except OSError as exc:
            raise LabError(f"cannot start systemd-nspawn for {record.name}: {exc}") from exc
    return proc.pid


def kill_cgroup(directory: Path) -> None:
    kill_file = directory / "cgroup.kill"
    if kill_file.exists():
        try:
            kill_file.write_text("1")
            return
        except OSError:
            pass
    for procs in directory.rglob("cgroup.procs"):
        try:
            pids = procs.read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass


def cgroup_pids(directory: Path) -> list[int]:
    pids: list[int] = []
    if not directory.is_dir():
        return pids
    for procs in directory.rglob("cgroup.procs"):
        try:
            pids += [int(pid) for pid in procs.read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def remove_cgroup_tree(directory: Path) -> None:
    if not directory.is_dir():
        return
    for sub in sorted((p for p in directory.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            sub.rmdir()
        except OSError:
            pass
    try:
        directory.rmdir()
    except OSError:
        pass

