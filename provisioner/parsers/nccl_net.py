"""The shapes of NCCL's network lines (parsers/nccl_debug): the `NET/<name> : Using ...` device and interface
lists, and the `via NET/<name>/<dev>` connections, in the wording of every release that prints them.

A network's name is its plugin's own (`ncclNet->name`): NCCL's `IB` and `Socket`, but also aws-ofi-nccl's
`AWS Libfabric` (with a blank), the rdma-sharp plugins' `UCX-RMA` and `IBext_v8`, so it is read up to the
`/<device index>` that follows it, never as one word.

How the network was set up (`NetSetup`): aws-ofi-nccl's choice of libfabric provider, `NET/OFI Selected Provider
is efa` (0.9 to 1.5), `... is efa (found 4 nics)` (1.6 to 1.13), `NET/OFI Selected provider is efa, fabric is
efa-direct (found 4 nics)` (1.14 on); NCCL's socket transport, `NET/Socket: Using 2 threads and 8 sockets per
thread` (2.4.8 on, when NCCL_NSOCKS_PERTHREAD and NCCL_SOCKET_NTHREADS, or a cloud's defaults, ask for them), and
GPUDirect-TCPX's, which prints it each time it listens, `NET/GPUDirectTCPX: Using 6 threads and 1 sockets per
thread` (src/connect.cc; set by NCCL_GPUDIRECTTCPX_SOCKET_NTHREADS and NCCL_GPUDIRECTTCPX_NSOCKS_PERTHREAD, else
6 and 1 on a gVNIC, 2 and 8 on an ENA).

Google Cloud's plugins say which of them NCCL loaded, and name their control interface apart from the data NICs
(the control sockets carry no payload, so that interface is never the data path):
- GPUDirect-TCPX (nccl-plugin-gpudirecttcpx, network `GPUDirectTCPX_v7`): `NET/GPUDirectTCPX ver. 3.1.8.`; with
  NCCL_GPUDIRECTTCPX_CTRL_DEV set, `NET/GPUDirectTCPX : Using ctrl socket on eth0, 10.128.0.5<0>` then
  `NET/GPUDirectTCPX : Using ctrl [ctrl]eth0:10.128.0.5<0>`, else `... : Using default ctrl sockets`; then the data
  NICs, `NET/GPUDirectTCPX : Using [0]eth1:192.168.0.2<0> [1]eth2:192.168.1.2<0>`.
- TCPXO (network `FasTrak`): `NET/FasTrak <time>: Initializing network FasTrak, version: 1.0.17`.
- gIB, Google's IB-verbs plugin for A3 Ultra and A4 (network `gIB`): `NET/gIB : Initializing gIB v1.0.2`; being
  NCCL's IB transport under another name, it lists its devices as NET/IB does, `[0]mlx5_0:1/RoCE ...; OOB eth0:...`.
"""

from __future__ import annotations

import re

from provisioner.parsers._text import Parsed

_OFI_PROVIDER = re.compile(
    r"^NET/OFI Selected [Pp]rovider is (?P<ofi_provider>[^\s,(]+)(?:, fabric is (?P<ofi_fabric>[^\s,(]+))?"
    r"(?: \(found (?P<ofi_nics>[0-9]+) nics\))?"
)
_SOCKET_THREADS = re.compile(
    r"^NET/(?:Socket|GPUDirectTCPX)\s*:\s*Using (?P<socket_threads>[0-9]+) threads and "
    r"(?P<sockets_per_thread>[0-9]+) sockets per thread"
)
ADDRESS_TAIL = re.compile(r"<[0-9]+>$")
# `NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>`, `NET/Socket : Using [0]eth0:10.0.0.1<0>`; NET/IB
# with no device (2.24 on print the line after `No device found.`): `Using [RO]; OOB ...` or `Using  ; OOB ...`.
NET_USING = re.compile(r"^NET/(?P<name>\w+)\s*:\s*Using\s*(?P<rest>[\[;].*)$")
# Connections between ranks through the network: `Ring 00 : 0 -> 1 [send] via NET/IB/0` (2.3 to 2.6),
# `Channel 00/0 : 0[1a000] -> 1[1a000] [send] via NET/Socket/0/GDRDMA` (2.7 on, `/1(0)` for a shared
# device); 2.1/2.2 print the pair alone, `3 -> 12 via NET/IB/0/GDRDMA` (https://github.com/NVIDIA/nccl/issues/133).
VIA_NET = re.compile(
    r"^(?:(?:Ring|Channel) [0-9]+.*|[0-9]+ -> [0-9]+ )\bvia NET/(?P<name>[^/]*?\S)/[0-9]+(?=[/(\s]|$)"
)
OOB = re.compile(r"\bOOB\s+(?P<iface>\S+)")
CTRL_USING = re.compile(
    r"^NET/\w+\s*:\s*Using ctrl(?:\s+socket on (?P<dev>[^\s,]+),\s*(?P<addr>\S+)|\s*\[ctrl\](?P<entry>\S+))"
)
_PLUGIN_VERSIONS = (
    re.compile(r"^NET/(?P<net_plugin>\w+) ver\. (?P<net_plugin_version>[0-9][\w.+-]*?)\.?$"),
    re.compile(r"^NET/(?P<net_plugin>\w+)\s*:\s*Initializing \w+ v(?P<net_plugin_version>[0-9][\w.+-]*)"),
    re.compile(r"^NET/\w+\b.*?:\s*Initializing network (?P<net_plugin>\w+), version:\s*"
               r"(?P<net_plugin_version>[0-9][\w.+-]*)"),
)
_ENTRY = re.compile(r"\[[0-9]+\](?P<entry>\S+)")
# One IB device of the list: ` [0]mlx5_0:1/IB` (2.3 on); the members of a merged device, ` [0]={[0] mlx5_0:1/IB,
# [1] mlx5_1:1/IB}` (2.20 to 2.23); the rail and plane after the port, ` [0]mlx5_0:1:2:0/IB`, `mlx5_0:1::0/IB`
# (2.30.7). The link layer is IB, RoCE or UNSPECIFIED.
_IB_ENTRY = re.compile(
    r"\[[0-9]+\]\s*(?P<device>[^\s:\[\]{},=]+):(?P<port>[0-9]+)(?::[0-9]*){0,2}/(?P<layer>[A-Za-z]\w*)"
)


def interfaces(rest: str) -> list[str]:
    """The interfaces of a socket list: `[0]eth0:10.0.0.23<0>` -> `eth0:10.0.0.23`."""
    return [ADDRESS_TAIL.sub("", m.group("entry")) for m in _ENTRY.finditer(rest)]


def ib_devices(rest: str) -> list[str]:
    """The devices of an IB list as `name:port/layer`, merged devices' members each on their own."""
    return [f"{m['device']}:{m['port']}/{m['layer']}" for m in _IB_ENTRY.finditer(rest.split("; OOB")[0])]


def ctrl_interface(message: str) -> str | None:
    """The control interface a plugin's `Using ctrl` line names, as `eth0:10.128.0.5`, or None for another line."""
    m = CTRL_USING.match(message)
    if m is None:
        return None
    return ADDRESS_TAIL.sub("", m["entry"] or f"{m['dev']}:{m['addr']}")


def using_lists(name: str, rest: str) -> dict[str, list[str]]:
    """What a `NET/<name> : Using` list adds: `ib_devices` and `oob_interfaces` for NET/IB and for a plugin that
    lists devices as it does (gIB), `socket_interfaces` for a list of interfaces (NET/Socket, GPUDirect-TCPX's data
    NICs). Empty for NET/IB with no device (2.2x after `No device found.`): it is then no transport."""
    devices = ib_devices(rest)
    if name != "IB" and not devices:
        return {"socket_interfaces": interfaces(rest)}
    oob = [ADDRESS_TAIL.sub("", m["iface"])] if (m := OOB.search(rest)) else []
    return {"ib_devices": devices, "oob_interfaces": oob} if devices else {"oob_interfaces": oob}


def bootstrap_interfaces(rest: str) -> list[str]:
    """`ens7:10.128.0.33<0>`, older `[0]ens7:10.128.0.33<0>`; several interfaces are space separated."""
    return [ADDRESS_TAIL.sub("", re.sub(r"^\[[0-9]+\]", "", token)) for token in rest.split()]


class NetSetup(Parsed):
    """How the network NCCL chose was set up, as the last such line said (the fields of an NCCL log's facts)."""

    ofi_provider: str | None = None  # the libfabric provider aws-ofi-nccl selected: efa, verbs;ofi_rxm, tcp
    ofi_fabric: str | None = None  # its fabric (aws-ofi-nccl 1.14 on): efa-direct, efa
    ofi_nics: int | None = None  # the NICs it found for that provider (1.6 on)
    socket_threads: int | None = None  # NCCL's socket transport or GPUDirect-TCPX: helper threads per connection
    sockets_per_thread: int | None = None  # and sockets per thread
    net_plugin: str | None = None  # the network plugin that named itself with its version: GPUDirectTCPX, gIB
    net_plugin_version: str | None = None


_COUNTS = frozenset({"ofi_nics", "socket_threads", "sockets_per_thread"})


def net_setup(message: str) -> dict[str, str | int] | None:
    """The NetSetup fields a network line gives, or None for any other line."""
    m = _OFI_PROVIDER.match(message) or _SOCKET_THREADS.match(message)
    m = m or next((found for pattern in _PLUGIN_VERSIONS if (found := pattern.match(message))), None)
    if m is None:
        return None
    return {k: int(v) if k in _COUNTS else v for k, v in m.groupdict().items() if v is not None}
