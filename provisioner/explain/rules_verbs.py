"""Causes on the RDMA side: work-completion errors by class, verbs / libfabric resource failures, the
locked-memory limit, and the HCA's own faults (fatal async events, firmware health messages).

Wording read (learned from NCCL's release history): completion errors in every form the parser knows
(see parsers/nccl_errors); `Call to ibv_create_qp failed` (2.3 on) and `... failed with error Cannot
allocate memory` (later); `NET/IB : Got async event : local catastrophic error` (2.3 to 2.1x) and
`NET/IB : mlx5_0:1 async fatal event: ...` (newest). libibverbs' own `RLIMIT_MEMLOCK is 65536 bytes`
warning and mlx5_core's kernel messages (`health compromised`, `firmware internal error`, `syndrome`).
"""

from __future__ import annotations

import re
from collections import defaultdict

from provisioner.explain import completion_ends, ibverbs
from provisioner.explain.evidence import counted, evidence, grep, hosts, signal, warning_lines
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.memlock import memlock_cause
from provisioner.explain.model import Cause
from provisioner.explain.rules_events import gid_changes
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_errors import OFI_BENIGN, CallFailure, CompletionError

_NO_MEMORY = re.compile(r"Cannot allocate memory|errno\s*=?\s*12\b|ENOMEM|-12\b", re.I)
_OFI_LINE = re.compile(r"NET/OFI\b.*(?:fail|unable|error|couldn't|could not)|\bfi_\w+\(?\)?\s*(?:call\s+)?failed", re.I)
_FIRMWARE = re.compile(
    r"health compromised|firmware internal error|FW fatal|fw_fatal|fatal error \d+ detected|"
    r"device's health|internal error.*syndrome|health.*syndrome|\bsyndrome\s*(?:0x[0-9a-f]+|\()|"
    r"assert_var\[|local catastrophic error|unrecoverable.*(?:firmware|hca)|pci_channel_io_perm_failure",
    re.I,
)
# A work completion's syndrome is the request's failure, not the device's: UCX's `Send completion with error on
# qp 0x2a8af: remote invalid request error syndrome 0x8a`, `Remote QP on mlx5_0:1/IB (synd 0x14 vend 0x89 ...)`.
_COMPLETION_SYNDROME = re.compile(r"completion with error|\bQP on \S+ \(synd\b", re.I)
_EVENT_CHANNEL = re.compile(r"get_async_event")
_KERNEL_DEVICE = re.compile(r"\b(?P<dev>mlx\d_core \S+?|mlx\d_\d+)[:\s]")


# Flushed requests with no earlier error anywhere in the log: NCCL's maintainers traced these (vendor error 249,
# 0xf9) to PCIe ACS left on between NIC and GPU and to the platform's firmware (NVIDIA/nccl#1353, #1405).
_LONE_FLUSH = (" No earlier error from the RDMA stack (another completion error, an HCA event, a failed verbs call) is "
               "in the log: the first failure is on the peer's side (its log), elsewhere in this one, or below NCCL. "
               "Where no rank logs one, NCCL's maintainers have traced such flushes to PCIe ACS redirecting the NIC's "
               "peer traffic to GPU memory, and to the server's platform firmware.")
_LONE_FLUSH_FIX = (" If no rank shows an earlier error: check ACS on the PCIe bridges between NIC and GPU "
                   "(`sudo lspci -vvv | grep ACSCtl` must show SrcValid- everywhere; turn ACS off in the BIOS), the "
                   "IOMMU (`iommu=pt`), and update the server's BIOS/platform firmware.")


def _earlier_errors(logs: list[Log]) -> bool:
    """Whether the log shows anything a flushed request could echo: a completion error of another class, an async
    event, a failed verbs call."""
    return any(log.nccl and (log.nccl.async_events or log.nccl.call_failures
                             or any(ibverbs.status(e.status).first_cause for e in log.nccl.completion_errors))
               for log in logs)


def _end(host: str | None, device: str | None, addresses: list[str]) -> str:
    """One end of a connection as a cause names it: `gpu4 (mlx5_0, 10.0.0.1)`."""
    said = [d for d in [device] if d] + addresses
    return f"{host or 'a host'}" + (f" ({', '.join(said)})" if said else "")


def _vendor(errors: list[CompletionError]) -> list[str]:
    return unique([f"0x{e.vendor_error:x}" for e in errors if e.vendor_error is not None])


def completion_errors(logs: list[Log]) -> list[Cause]:
    groups: dict[tuple[str | None, str | None, int], list[tuple[Log, CompletionError]]] = defaultdict(list)
    for log in logs:
        for error in (log.nccl.completion_errors if log.nccl else []):
            groups[(error.host, error.device, error.status)].append((log, error))
    first_causes = any(ibverbs.status(code).first_cause for _, _, code in groups)
    causes = []
    for keys, why in completion_ends.pair({k: [e for _, e in items] for k, items in groups.items()}, logs):
        items = [item for key in keys for item in groups[key]]
        code = keys[0][2]
        peers = unique([e.peer for _, e in items if e.peer])
        # The vendor codes of the error itself: a flush folded in as its echo carries its own (0xf9 on mlx5), which
        # the sentence on the flush names instead.
        vendor = _vendor([e for key in keys if key[2] == code for _, e in groups[key]])
        found = ibverbs.status(code)
        lines = [line for log, e in items for line in warning_lines(log, e.line)]
        if len(keys) == 2:
            # Each end's address is the peer the other end's records name.
            (a, a_dev, _), (b, b_dev, _) = keys
            named = [unique([e.peer for _, e in groups[key] if e.peer]) for key in reversed(keys)]
            where = f"both ends of the connection between {_end(a, a_dev, named[0])} and {_end(b, b_dev, named[1])}"
            detail = (f"{counted(len(items), 'completion error')}, logged by both ends of one connection ({why}): "
                      f"{found.meaning}.")
            if keys[1][2] != code:
                echoes = len(groups[keys[1]])
                flushed = _vendor([e for _, e in groups[keys[1]]])
                detail += (f" {b or 'The other end'}'s {counted(echoes, 'flushed request')} "
                           f"({ibverbs.status(keys[1][2]).symbol}) {'is' if echoes == 1 else 'are'} the echo of it "
                           "on the same connection, not a cause in itself"
                           + (f" (vendor syndrome {', '.join(flushed)})." if flushed else "."))
        else:
            host, device, _ = keys[0]
            where = _end(host, device, [])
            towards = f" towards {', '.join(peers)}" if peers else ""
            detail = f"{counted(len(items), 'completion error')}{towards}: {found.meaning}."
        if vendor:
            detail += f" Vendor syndrome {', '.join(vendor)}."
        fix = found.fix
        if not found.first_cause and first_causes:
            detail += " Another completion error above comes first."
        elif not found.first_cause and not _earlier_errors(logs):
            detail += _LONE_FLUSH
            fix += _LONE_FLUSH_FIX
        hint, gid_lines = gid_changes(logs)
        detail += hint
        errors = signal(lines)
        lines += gid_lines
        score = ibverbs.score(found)
        causes.append(Cause(
            id="ib-completion-error",
            title=f"RDMA completion error {code} ({found.symbol}) on {where}",
            detail=detail, fix=fix, score=score,
            hosts=unique([h for h, _, _ in keys if h]), addresses=peers, evidence=evidence(lines), signal=errors,
        ))
    return causes


def _line_of(log: Log, number: int) -> list[LogLine]:
    return warning_lines(log, number) if log.nccl else [line for line in [log.line(number)] if line]


# The advice follows the call that failed: registering memory is the host's GPUDirect/memlock setup,
# moving a queue pair to RTR/RTS is its addressing towards the peer, creating one is the device's state.
_FAMILY_DETAIL = {
    "registration": "Memory registration failed: GPU buffers could not be registered with the HCA.",
    "connection": "The queue pair could not be moved to a connected state: the addressing towards the peer "
                  "(GID, MTU, port state) was refused or timed out.",
    "device": "The HCA refused to create or change the RDMA resource.",
}
_FAMILY_FIX = {
    "registration": "Check GPUDirect RDMA on the host (`lsmod | grep nvidia_peermem`, or dma-buf with the open "
                    "GPU kernel module), the locked-memory limit (`ulimit -l unlimited`), and the HCA's state "
                    "(`ibv_devinfo`, dmesg).",
    "connection": "Compare both hosts' RDMA addressing: the GID index (NCCL_IB_GID_INDEX; `show_gids`), RoCE "
                  "version, active_mtu (`ibv_devinfo`) and that the port is ACTIVE on both; on RoCE that the "
                  "peer's address is reachable on that interface.",
    "device": "Check the HCA's state (`ibv_devinfo`: port ACTIVE; dmesg for mlx5_core errors), the locked-memory "
              "limit (`ulimit -l unlimited`), and the device's QP/CQ limits (`ibv_devinfo -v` max_qp/max_cq) "
              "against the number of ranks and NCCL_IB_QPS_PER_CONNECTION.",
}


# The errno a failed ibv_modify_qp reports says what the port refused, so the advice follows it (the call
# prints it as `errno 110`, as `failed with 110 Connection timed out, ...` from 2.26, or as the text alone).
_ERRNO_NAMES = {110: "Connection timed out", 22: "Invalid argument", 101: "Network is unreachable",
                113: "No route to host", 19: "No such device", 61: "No data available"}
_MODIFY_QP_FIX = {
    110: "The move to {state} timed out resolving the peer's GID: on RoCE the kernel found no neighbour (ARP/ND) "
         "for the peer's address on this port's interface. Check that the GID index (NCCL_IB_GID_INDEX, "
         "`show_gids`) names an address in the peer's subnet/VLAN and of the same RoCE version on both hosts, "
         "that `ping -I <that interface> <peer address>` answers, and that the port is ACTIVE on both. On a "
         "rail-optimized fabric (NIC N of one node reaches only NIC N of the others) NCCL_CROSS_NIC=0 keeps NCCL "
         "from pairing NICs of different rails.",
    22: "The port refused a queue-pair attribute for {state}: a GID index that is empty or absent on this port "
        "(NCCL_IB_GID_INDEX; list with `show_gids`), an MTU above the port's active_mtu (`ibv_devinfo`; NCCL_IB_MTU"
        "), or a traffic class / service level the port does not take (NCCL_IB_TC, NCCL_IB_SL). Compare both "
        "hosts.",
    101: "No route to the peer's GID for {state}: on RoCE v2 the peer's address is routed, so this port's "
         "interface needs a route to it (`ip route get <peer address>`); check the GID index "
         "(NCCL_IB_GID_INDEX) is a RoCE v2 entry in the data subnet on both hosts, and on a rail-optimized "
         "fabric (each NIC's subnet reaches only the same NIC of other nodes) set NCCL_CROSS_NIC=0.",
}
_MODIFY_QP_FIX[113] = _MODIFY_QP_FIX[101]
# ENODEV: the kernel found no network interface behind the RoCE GID the queue pair names. In a container that is
# the usual case of a pod given the RDMA device (/dev/infiniband) but no interface of that NIC: only the cluster
# network's eth0 (Calico and the like), no Multus macvlan / SR-IOV attachment, no hostNetwork; its GIDs then read
# as zero (Mellanox/k8s-rdma-shared-dev-plugin#72, #101). Or the GID index picked is the host's interface, not the
# one the container has (NVIDIA/nccl#925), or an HCA whose interface is elsewhere (NVIDIA/nccl#799).
_MODIFY_QP_FIX[19] = (
    "The move to {state} found no network interface behind the RoCE GID used: in a container or pod the RDMA "
    "device was passed in but no interface of that NIC is in its network namespace, so the GID has no netdev "
    "(`show_gids` inside the pod lists it as zero or without a device). Attach an interface of that NIC to the "
    "pod (a Multus NetworkAttachmentDefinition for macvlan, host-device or SR-IOV on it, named in the pod's "
    "k8s.v1.cni.cncf.io/networks annotation; or hostNetwork: true / `docker --network=host`), then point "
    "NCCL_IB_GID_INDEX at that interface's RoCE v2 entry (`show_gids` in the pod) and limit NCCL_IB_HCA to the "
    "devices whose interface the pod has. On a host, the GID's interface was removed or renamed: check "
    "`show_gids` and `ibdev2netdev`.")
# The errnos whose meaning is clear enough to be the cause's title (the generic one says only that a call failed).
_MODIFY_QP_TITLE = {
    19: "the RDMA device has no network interface behind its RoCE GID (ibv_modify_qp: No such device): a pod "
        "or container given the device but not its NIC's interface",
}
_STATE = re.compile(r"next state (?P<state>\w+)")
_GID_INDEX = re.compile(r"local GID index (?P<index>[0-9]+)")


def _errno(failure: CallFailure) -> int | None:
    if failure.errno is not None:
        return failure.errno
    if m := re.match(r"(?P<code>[0-9]+)\b", failure.error):
        return int(m["code"])
    return next((code for code, name in _ERRNO_NAMES.items() if name.lower() in failure.error.lower()), None)


def _modify_qp_fix(failures: list[CallFailure]) -> tuple[str, list[str], str | None] | None:
    """Advice for failed queue-pair transitions by the errno they report, the settings involved, and a title
    of its own where the errno says what happened (else None)."""
    for failure in failures:
        code = _errno(failure)
        if "modify_qp" in (failure.call or "") and code in _MODIFY_QP_FIX:
            state = m["state"] if (m := _STATE.search(failure.error)) else "RTR/RTS"
            settings = [f"NCCL_IB_GID_INDEX={m['index']}" if (m := _GID_INDEX.search(failure.error))
                        else "NCCL_IB_GID_INDEX"]
            # A peer that does not answer or cannot be routed to may be on another rail.
            settings += ["NCCL_CROSS_NIC"] if code in (110, 101, 113) else []
            settings += ["NCCL_IB_HCA", "k8s.v1.cni.cncf.io/networks"] if code == 19 else []
            return _MODIFY_QP_FIX[code].format(state=state), settings, _MODIFY_QP_TITLE.get(code)
    return None


def _family(calls: list[str]) -> str:
    if any("reg_" in call for call in calls):
        return "registration"
    if any("modify_qp" in call or "_ece" in call for call in calls):
        return "connection"
    return "device"


_UNSUPPORTED = re.compile(r"not supported|EOPNOTSUPP|errno 95\b", re.I)
_DMABUF_FIX = ("The RDMA driver refused dma-buf registration of GPU memory: it is older than dma-buf support "
               "(MLNX_OFED/DOCA or the kernel's rdma-core): NCCL_DMABUF_ENABLE=0 makes NCCL register through "
               "nvidia_peermem instead, or update the driver.")


def resource_failures(logs: list[Log]) -> list[Cause]:
    """Failed verbs/OFI calls and the locked-memory limit: the job could not create queue pairs or
    completion queues, or register memory, so it never ran over RDMA."""
    failures = [(log, f) for log in logs for f in (log.nccl.call_failures if log.nccl else [])]
    ofi_text = [line for line, _ in grep(logs, _OFI_LINE) if not OFI_BENIGN.search(line.text)]
    causes = []
    enomem = [(log, f) for log, f in failures if _NO_MEMORY.search(f.error) or f.errno == 12]
    calls = unique([f.call for _, f in enomem if f.call])
    if cause := memlock_cause(logs, [line for log, f in enomem for line in _line_of(log, f.line)], calls):
        causes.append(cause)
    other = [(log, f) for log, f in failures
             if not (_NO_MEMORY.search(f.error) or f.errno == 12) or (f.api == "ofi" and not causes)]
    # NCCL's async-event thread reads the device's event channel until the call fails: a failed
    # ibv_get_async_event is the device gone (the firmware rule's), not a resource the HCA refused.
    # A device that cannot be opened is one the container was not given (rules_container), not a refused resource.
    verbs = [(log, f) for log, f in other if f.api == "verbs" and not _EVENT_CHANNEL.search(f.call or "")
             and "open_device" not in (f.call or "")]
    ofi = [(log, f) for log, f in other if f.api == "ofi"]
    if verbs:
        lines = [line for log, f in verbs for line in _line_of(log, f.line)]
        calls = unique([f"{f.call or 'a verbs call'}: {f.error}" for _, f in verbs])
        family = _family([f.call or "" for _, f in verbs])
        fix, settings, title = _FAMILY_FIX[family], list[str](), None
        if family == "connection" and (found := _modify_qp_fix([f for _, f in verbs])):
            fix, settings, title = found
        hint, gid_lines = gid_changes(logs) if family == "connection" else ("", [])
        if any("dmabuf" in (f.call or "") and _UNSUPPORTED.search(f.error) for _, f in verbs):
            # nccl#778: the RDMA driver predates dma-buf registration; NCCL falls back only when told.
            fix = _DMABUF_FIX + " " + fix
            settings = [*settings, "NCCL_DMABUF_ENABLE=0"]
        causes.append(Cause(
            id="verbs-resource-failure",
            title=title or "an RDMA verbs call failed (queue pair, completion queue or memory registration)",
            detail=f"{'; '.join(calls[:4])}. {_FAMILY_DETAIL[family]}{hint}",
            fix=fix, score=90, settings=settings,
            hosts=unique([f.host for _, f in verbs if f.host]) or hosts(lines), evidence=evidence(lines + gid_lines),
            signal=signal(lines),
        ))
    if ofi or ofi_text:
        lines = [line for log, f in ofi for line in _line_of(log, f.line)] + ofi_text
        causes.append(Cause(
            id="ofi-failure",
            title="the OFI (libfabric) network plugin failed",
            detail="; ".join(unique([f.error for _, f in ofi])[:3]) or "NET/OFI reported a failure",
            fix="Check the libfabric provider on the host (`fi_info -p efa` or the provider in FI_PROVIDER), "
                "that the aws-ofi-nccl plugin matches the NCCL and libfabric versions, the locked-memory limit "
                "(`ulimit -l unlimited`) and, for GPU buffers, FI_EFA_USE_DEVICE_RDMA / GPUDirect support.",
            score=88, hosts=unique([f.host for _, f in ofi if f.host]) or hosts(lines), evidence=evidence(lines),
            signal=signal(lines),
        ))
    return causes


def firmware_fault(logs: list[Log]) -> list[Cause]:
    lines = [line for line, _ in grep(logs, _FIRMWARE) if not _COMPLETION_SYNDROME.search(line.text)]
    events = [(log, e) for log in logs for e in (log.nccl.async_events if log.nccl else []) if e.kind == "device"]
    lines += [line for log, e in events for line in _line_of(log, e.line)]
    if not lines:
        return []
    lines += [line for log in logs for f in (log.nccl.call_failures if log.nccl else [])
              if _EVENT_CHANNEL.search(f.call or "") for line in _line_of(log, f.line)]
    devices = unique([e.device for _, e in events if e.device]
                     + [m.group("dev") for line in lines if (m := _KERNEL_DEVICE.search(line.text))])
    return [Cause(
        id="hca-firmware-fault",
        title="the HCA reported a firmware or device fault",
        detail=f"{', '.join(devices) or 'an RDMA device'} reported an internal failure (firmware health, fatal "
               "event or syndrome): everything on that device fails after it, whatever the network does.",
        fix="Take the host out of service; read `dmesg` for mlx5_core health/syndrome lines, check the firmware "
            "version (`ibv_devinfo` fw_ver, `mlxfwmanager`), reset the device (`mlxfwreset`) or reboot, and "
            "replace the HCA if it recurs.",
        score=96, hosts=hosts(lines), evidence=evidence(sorted(lines, key=lambda ln: (ln.file, ln.number))),
        signal=signal(lines),
    )]


# `NET/IB : Attempted to connect incompatible devices: [1]mlx5_1:1/RoCE and [0]mlx5_0:1/IB. Try selecting NICs
# of only one link type using NCCL_IB_HCA` (transport/net_ib.cc from v2.26.2, net_ib/connect.cc in v2.30.7;
# `... merge incompatible devices` when NCCL fuses NICs into one virtual device).
_INCOMPATIBLE = re.compile(
    r"Attempted to (?P<what>connect|merge) incompatible devices:\s*\[[0-9]+\](?P<a>[^\s:\[]+):[0-9]+/(?P<la>\w+)"
    r"\s+and\s+\[[0-9]+\](?P<b>[^\s:\[]+):[0-9]+/(?P<lb>\w+)")


def incompatible_devices(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _INCOMPATIBLE)
    if not hits:
        return []
    pairs = unique([f"{m['a']} ({m['la']}) with {m['b']} ({m['lb']})" for _, m in hits])
    lines = [line for log in logs for line, _ in log.grep(_INCOMPATIBLE) for line in _line_of(log, line.number)]
    merge = all(m["what"] == "merge" for _, m in hits)
    return [Cause(
        id="ib-incompatible-devices",
        title="NICs of different link types (InfiniBand and RoCE) were selected together",
        detail=f"NCCL tried to {'merge' if merge else 'connect'} {'; '.join(pairs)}: one connection (or one fused "
               "device) cannot mix link layers, so the HCAs selected on this host, or on this host and its peer, "
               "do not match.",
        fix="Set NCCL_IB_HCA on every host to the HCAs of the one fabric the job uses (the same list on all "
            "nodes, e.g. =mlx5_0,mlx5_1; exclude the others with ^mlx5_4), after checking each port's link_layer "
            "with `ibv_devinfo` or `ibdev2netdev`; a host whose ports are cabled to another fabric than its "
            "peers' must be fixed or left out.",
        score=90, hosts=hosts(lines), settings=["NCCL_IB_HCA"], evidence=evidence(lines),
    )]
