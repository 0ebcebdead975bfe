"""The link readings `watch` adds to each host's one run per cycle: RDMA port counters and netdev carrier changes.

Port counters are read as the port_counters resource reads them (every device and port under
fabnet_sysfs_root's class/infiniband); carrier_changes and carrier come from /sys/class/net, which counts
every time a link lost or regained its carrier, however briefly, so a flap between two cycles is still seen;
ifindex tells a netdev registered again (a driver reload) from one that stayed.
After the counters, the devices and ports class/infiniband holds are listed: a device that was unbound, fell
off the PCIe bus or lost its driver leaves no file to complain about, only a name that is no longer there.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from provisioner.errors import ParseError
from provisioner.parsers._live import reading_host_output
from provisioner.parsers.port_counters import folder_of, parse_port_counters
from provisioner.resources.base import Probe, Results, read_lines_command, sh

NET_MARK = "@@fabnet-net"
HW_MARK = "@@fabnet-hw"  # after the carrier readings: the netdevs a device backs, with their devices
BOUND_MARK = "@@fabnet-bound"  # then the PCI devices a driver is bound to
END_MARK = "@@fabnet-links-end"
RDMA_MARK = "@@fabnet-rdma"  # between the counters and the listing of devices and ports
_PRESENT = re.compile(r"^(?P<device>[^/\s]+)(?:/ports/(?P<port>[0-9]+))?$")  # DEVICE or DEVICE/ports/N
_NET = re.compile(r"^/sys/class/net/(?P<iface>[^/\s]+)/(?P<name>carrier_changes|carrier|ifindex):(?P<value>-?[0-9]+)$")

# Error counters whose rise means a sick link or port; traffic counters (packets, data) are left out. The
# mlx5 hw_counters after local_ack_timeout_err count RoCE transport trouble a lossy fabric causes: a peer
# not ready past the retry limit, a sequence gap the responder inferred, and retransmissions. AWS EFA's port
# hw_counters (drivers/infiniband/hw/efa/efa_verbs.c, EFA_DEFINE_PORT_STATS) add receive drops, failed RDMA
# reads and writes, and, on newer kernels, SRD retransmit timeouts and peers that stopped answering or were
# slowed down.
ERROR_COUNTERS = frozenset({
    "symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
    "port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
    "VL15_dropped", "out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err",
    "rnr_nak_retry_err", "implied_nak_seq_err", "roce_adp_retrans",
    "rx_drops", "rdma_read_wr_err", "rdma_write_wr_err", "retrans_timeout_events", "unresponsive_remote_events",
    "impaired_remote_conn_events",
})
# Error counters some drivers keep for the whole device, in DEVICE/hw_counters rather than under a port (the
# kernel's device-level hw_counters group). EFA (EFA_DEFINE_DEVICE_STATS): admin commands that failed or never
# completed, and verbs that failed to create their object, which an application sees as a failed QP, CQ, MR or
# AH setup. hfi1 (chip.c dev_cntrs): receive overflow, length, short-packet and ICRC errors, 32-bit counters it
# names with `,32`. mlx5 in switchdev mode keeps its RoCE counters here, under the port names above.
DEVICE_ERROR_COUNTERS = ERROR_COUNTERS | frozenset({
    "cmds_err", "no_completion_cmds", "alloc_pd_err", "create_qp_err", "create_cq_err", "reg_mr_err",
    "alloc_ucontext_err", "create_ah_err", "mmap_err",
    "RcvOverflow,32", "RxLenErr,32", "RxShrErr,32", "RxICrcErr,32",
})


@dataclass
class LinkReading:
    # "mlx5_0/1 symbol_error" -> value; a device's own counter has no port: "efa_0 cmds_err"
    counters: dict[str, int] = field(default_factory=dict)
    carrier_changes: dict[str, int] = field(default_factory=dict)  # netdev -> count since boot
    carrier: dict[str, int] = field(default_factory=dict)  # netdev -> 1 up, 0 down (absent: down or admin down)
    # netdev -> its index, new each time the kernel registers it: a driver reload or device reset between two
    # cycles gives the same name a new index, and starts its carrier_changes again from zero
    ifindex: dict[str, int] = field(default_factory=dict)
    # The netdevs a device backs (fabnet_sysfs_root's class/net/NAME/device): a NIC's, not a veth's or a bridge's,
    # whose names a container runtime reuses for new ones (a pod restarted) with no link lost. Nor an SR-IOV
    # virtual function's (its device has a `physfn`): a device plugin moves those into pods' namespaces and back.
    # None where the output ended before that list (cut): then no netdev is judged gone.
    hardware: frozenset[str] | None = None
    devices: dict[str, str] = field(default_factory=dict)  # such a netdev -> its device's name (a PCI address)
    # The PCI devices a driver is bound to: a NIC's netdev gone while its device is here was moved to another
    # namespace or renamed, not lost. None where the output ended before the list's end.
    bound: frozenset[str] | None = None
    # error counters the host has but could not read, named as in `counters` -> what it printed instead
    # (`N/A (no PMA)`, `Permission denied`)
    unreadable: dict[str, str] = field(default_factory=dict)
    # whole folders the host could not read, "mlx5_0/1 counters" or "efa_0 hw_counters" -> what it printed
    unreadable_folders: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # why the counters could not be read, if so
    # The RDMA devices and ports the host has, "mlx5_0" and "mlx5_0/1", and so the counters it could have; None
    # where this reading cannot say what is absent (an output without the listing, or cut before its end, or
    # counters that did not parse): then nothing is reported gone.
    present: frozenset[str] | None = None

    def why_unreadable(self, name: str) -> str | None:
        """What the host printed instead of the counter's value: its own file's complaint or its folder's."""
        if name in self.unreadable:
            return self.unreadable[name]
        where, _, counter = name.rpartition(" ")
        return self.unreadable_folders.get(f"{where} {folder_of(counter) if '/' in where else 'hw_counters'}")


@functools.lru_cache(maxsize=16)
def probe(sysfs_root: str) -> Probe:
    infiniband = sh(sysfs_root.rstrip("/") + "/class/infiniband")
    # Only the error counters, by name, under a port's counters/ or hw_counters/ and the device's hw_counters/:
    # a real 8-port node has hundreds of counter files (an hfi1 device alone about a thousand), most of them
    # traffic, and every cycle would send and parse them all. A name the driver lacks stays an unmatched
    # pattern, left out by the shell's own test (no process; else grep would send a `No such file` line per
    # name, about sixty, every cycle). grep's complaints join its output: a counter file the kernel refused
    # (Permission denied, Input/output error) is one the parser marks unreadable. A folder the shell cannot enter
    # (a link that loops, or one not searchable by a login that is not root) leaves its names unmatched, so it is
    # named to grep itself, whose complaint about it marks its counters unreadable rather than gone.
    files = " ".join([*(f"*/ports/*/*counters/{name}" for name in sorted(ERROR_COUNTERS)),
                      *(f"*/hw_counters/{name}" for name in sorted(DEVICE_ERROR_COUNTERS))])
    # Then every device and port, listed by the same shell with its own globs and printf (no process):
    # what is gone is what is no longer listed. A class/infiniband the shell cannot enter (ib_core unloaded) lists
    # nothing after the mark: every device is gone. `[ -e ]` drops an unmatched pattern and a dangling link.
    listing = (f'echo {sh(RDMA_MARK)}; for d in * */ports/*; do [ -e "$d" ] && printf "%s\\n" "$d"; done')
    # The shell reads the files itself (read_lines_command); grep, with its complaints, only where one will
    # not read. The probe's own shell (a subshell of the fact script) is the one that changes folder.
    read = read_lines_command('"$@"', 'grep -r -H . "$@" 2>&1')
    counters = (f'if cd -- {infiniband} 2>/dev/null; then set -- && for f in {files}; do [ -e "$f" ] && '
                'set -- "$@" "$f"; done; for d in */ports/*/*counters */hw_counters; do '
                '{ { [ -L "$d" ] && ! [ -e "$d" ]; } || { [ -d "$d" ] && ! [ -x "$d" ]; }; } && set -- "$@" "$d"; '
                f'done; {read}; '
                f'{listing}; else echo {sh(RDMA_MARK)}; fi')
    # grep -H . without its complaints: a netdev that is down refuses `carrier` (EINVAL), and says nothing.
    net = ('for __fn_f in /sys/class/net/*/carrier_changes /sys/class/net/*/carrier /sys/class/net/*/ifindex; do '
           '{ while IFS= read -r __fn_l || [ -n "$__fn_l" ]; do [ -z "$__fn_l" ] || '
           'printf \'%s:%s\\n\' "$__fn_f" "$__fn_l"; done <"$__fn_f"; } 2>/dev/null; done')
    # By the shell's globs, cd and printf alone; a name holds neither a slash nor a line break. `cd -P` resolves
    # the device link to the device's own folder, whose name is its PCI address.
    root = sysfs_root.rstrip("/")
    hardware = (f'echo {sh(HW_MARK)}; for __fn_f in {sh(root + "/class/net")}/*/device; do '
                '[ -e "$__fn_f" ] && ! [ -e "$__fn_f/physfn" ] && cd -P -- "$__fn_f" 2>/dev/null && '
                '__fn_f=${__fn_f%/device} && printf \'%s %s\\n\' "${__fn_f##*/}" "${PWD##*/}"; done; '
                f'echo {sh(BOUND_MARK)}; for __fn_f in {sh(root + "/bus/pci/devices")}/*/driver; do '
                '[ -e "$__fn_f" ] && __fn_f=${__fn_f%/driver} && printf \'%s\\n\' "${__fn_f##*/}"; done; '
                f'echo {sh(END_MARK)}')
    return Probe(f"{counters}; echo {sh(NET_MARK)}; {net}; {hardware}; true", timeout=20)


def read(results: Results | None, sysfs_root: str) -> LinkReading:
    result = results.get(probe(sysfs_root)) if results is not None else None
    if result is None:
        return LinkReading(problem="no link readings")
    return parse(result.stdout)


def parse(text: str) -> LinkReading:
    """The reading of one link probe's output. A watch reads each host's every cycle, mostly unchanged:
    the same text gives the same reading, kept for a few thousand texts (callers never change it)."""
    return _parse(text)


@functools.lru_cache(maxsize=2048)
def _parse(text: str) -> LinkReading:
    counters_text, ended, net_text = text.partition(NET_MARK)
    net_text, listed_hw, hardware = net_text.partition(HW_MARK)
    counters_text, listed, listing = counters_text.partition(RDMA_MARK)
    reading = LinkReading()
    try:
        with reading_host_output():  # the probe's own output: no paste to clean (parsers/_live.py)
            parsed = parse_port_counters(counters_text) if counters_text.strip() else None
    except ParseError as exc:
        parsed, reading.problem = None, str(exc)
    # The listing counts only whole, after counters read whole: a counter missing from a cut or unparsed output is
    # not one the host lost.
    if listed and ended and reading.problem is None and (parsed is None or parsed.complete):
        reading.present = frozenset(m.group("device") + (f"/{m.group('port')}" if m.group("port") else "")
                                    for line in listing.splitlines() if (m := _PRESENT.match(line.strip())))
    for port in parsed.ports if parsed is not None else []:
        where = f"{port.device}/{port.port}"
        for name, value in {**port.hw_counters, **port.counters}.items():
            if name in ERROR_COUNTERS:
                reading.counters[f"{where} {name}"] = value
        reading.unreadable.update({f"{where} {name}": printed for name, printed in port.unreadable.items()
                                   if name in ERROR_COUNTERS})
        reading.unreadable_folders.update({f"{where} {group}": why for group, why in port.unreadable_folders.items()})
    ports = parsed.ports if parsed is not None else []
    for device in parsed.devices if parsed is not None else []:
        own = [port for port in ports if port.device == device.device]
        for name, value in device.hw_counters.items():
            # EFA before "RDMA/efa: Split hardware stats to device and port stats" (8c1b4316c3fa, July 2021) served
            # its one list of counters both as the device's hw_counters and as its one port's, so a rise would be
            # reported twice (`efa_0 rx_drops`, `efa_0/1 rx_drops`). The port's is kept, under the name a newer
            # driver gives it; a device copy that differs from the port's is the device's own, and kept.
            if len(own) == 1 and name in ERROR_COUNTERS and own[0].value(name) == value:
                continue
            if name in DEVICE_ERROR_COUNTERS:
                reading.counters[f"{device.device} {name}"] = value
        for name, printed in device.unreadable.items():
            if len(own) == 1 and name in ERROR_COUNTERS and name in own[0].unreadable:
                continue  # the same old EFA copy, as above: the port's stands for both
            if name in DEVICE_ERROR_COUNTERS:
                reading.unreadable[f"{device.device} {name}"] = printed
        reading.unreadable_folders.update({f"{device.device} {group}": why
                                           for group, why in device.unreadable_folders.items()})
    for line in net_text.splitlines():
        m = _NET.match(line.strip())
        if m and m.group("iface") != "lo":
            table = {"carrier_changes": reading.carrier_changes, "carrier": reading.carrier,
                     "ifindex": reading.ifindex}[m.group("name")]
            table[m.group("iface")] = int(m.group("value"))
    hardware, listed_bound, bound = hardware.partition(BOUND_MARK)
    if listed_hw and listed_bound:  # the NICs' list is whole only when what follows it began
        pairs = [line.split(" ", 1) for line in hardware.splitlines() if line.strip()]
        reading.hardware = frozenset(pair[0] for pair in pairs)
        reading.devices = {pair[0]: pair[1] for pair in pairs if len(pair) == 2 and pair[1]}
        bound, whole, _ = bound.partition(END_MARK)
        if whole:
            reading.bound = frozenset(name for line in bound.splitlines() if (name := line.strip()))
    return reading
