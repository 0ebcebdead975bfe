"""Parse NCCL_DEBUG=INFO logs: NCCL/CUDA versions, the network NCCL chose, its IB devices and interfaces,
environment it reports, plugin messages, warnings, IB completion errors and communicators.

A log line contains `NCCL INFO|WARN|TRACE|ABORT`, usually after a `host:pid:tid [dev]` prefix (and a
`file.cc:123` location for WARN), or, from the closed-source 2.0 to 2.2, the level alone after that prefix
(parsers/nccl_line); `NCCL version X+cudaY` may stand alone. Where NCCL's own prefix names no host, what
stands before the line names it as it does for `fabnet explain` (parsers/_loggers): a pdsh/clush `gpu07: `
label, a syslog host, a Kubernetes pod, a collector's `worker-9 >> ` label, and the line is followed per
thread (host, pid, tid) like any other; a line of no known host is not (pids repeat from host to host). A
long WARN that a terminal wrapped continues on the next line; a traceback or another statement after it does
not. nccl-tests `#` lines are read for `#  Rank` entries. Logs are noisy, so any other line is recorded in
`unplaced` with its number, but input without a single NCCL line is not an NCCL log and raises ParseError.

`network` is the last `Using network X`. Logs of NCCL <= 2.5 print no such line: there `NET/Socket :
Using` names the bootstrap interface, and the network is IB when a `NET/IB : Using` line is present.
Env values are kept as NCCL applied them (`set by environment to 0.` is `0`). What each communicator built
(its place among nodes, rings, trees, the transport per channel and peer, init timing) is read by parsers/
nccl_channels.

A framework's quote of NCCL's last WARN (torch: `Last error:` then the message on the next line, or both on
one line when a paste flattened them) is read as that WARN when the log does not hold the WARN itself: often
the only place a rank's completion error or failed call shows. So is a network plugin's failure message alone
on its line, without NCCL's prefix and level (`NET/IBP:Got completion from peer ... with status=12 ...`, as
a report quotes it): `NET/<transport>` and a colon start only NCCL's network messages.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._loggers import prefix_arrow, prefix_host
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Fact, Line, Unplaced, content_lines, fail, prefix_label, split_lines, unique
from provisioner.parsers.nccl_channels import Communicator, Link, Thread, Topology
from provisioner.parsers.nccl_errors import (
    AsyncEvent,
    CallFailure,
    CompletionError,
    async_event,
    call_failure,
    completion,
)
from provisioner.parsers.nccl_line import label_host, nccl_log
from provisioner.parsers.nccl_net import (
    ADDRESS_TAIL,
    NET_USING,
    VIA_NET,
    NetSetup,
    bootstrap_interfaces,
    ctrl_interface,
    net_setup,
    using_lists,
)
from provisioner.parsers.nccl_tests import NcclTestRank, parse_rank, split_nccl_version

KIND = "nccl_debug"

# The host may be empty (`:168:1228 [2]`, NVIDIA/nccl#1808): then only a blank or the line's start before it.
_PREFIX = re.compile(
    r"(?:(?P<host>[^\s:]+)|(?<!\S)):(?P<pid>[0-9]+):(?P<tid>[0-9]+)\s+\[(?P<dev>[^\]]*)\]", re.ASCII)
# `Using network IB` (2.6 on); the closed-source 2.1/2.2 releases said `Using internal Network IB`. The name
# is the network plugin's own (`ncclNet->name`), and may hold blanks: aws-ofi-nccl's is `AWS Libfabric`.
_USING_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (?P<name>\S(?:.*\S)?)\s*$")
# 2.1/2.2: `NET : Using interface eth0:10.0.0.1<0>` and `NET/IB : Using interface ib0 for sideband ...`
# (https://github.com/horovod/horovod/issues/489, /134).
_NET_INTERFACE = re.compile(r"^NET(?:/(?P<name>\w+))?\s*:\s*Using interface (?P<iface>\S+)")
# NCCL 2.27+: one line per device, `NET/IB: [2] mlx5_2:uverbs2:1/RoCE provider=Mlx5 speed=400000 ...`.
_NET_DEVICE = re.compile(
    r"^NET/IB\s*:\s*\[[0-9]+\]\s*(?P<device>[^\s:]+):(?:uverbs[0-9]+:)?(?P<port>[0-9]+)/(?P<layer>\w+)"
)
_DRIVER = re.compile(r"^cudaDriverVersion\s+(?P<version>[0-9]+)", re.ASCII)
_BOOTSTRAP = re.compile(r"^Bootstrap\s*:\s*Using\s+(?P<rest>.*)$")
# 2.23+ with an out-of-band network (NCCL_OOB_NET_ENABLE): `Bootstrap: Using mlx5_0:1`, a net device and its
# port (`N/A:-1` when its properties could not be read), not an IP interface.
_BOOTSTRAP_DEVICE = re.compile(r"^(?P<device>[^\s:\[]+):(?P<port>-?[0-9]+)$")
# 2.21 to 2.23 say which plugin loader reads it: `TUNER/Plugin: NCCL_TUNER_PLUGIN set to X`.
_ENV = re.compile(r"^(?:[A-Z]+/Plugin:\s*)?(?P<name>[A-Z][A-Z0-9_]*) set (?:by (?P<source>.+?) )?to (?P<value>.*)$")
_PLUGIN = re.compile(r"plugin", re.IGNORECASE)
_COMM = re.compile(r"\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>[0-9]+) nr?[Rr]anks (?P<nranks>[0-9]+)")
# Interface names and addresses that are almost never the path between GPU nodes.
# torch's quote of ncclGetLastError(): `Last error:` and the message after it, or on the next line.
_LAST_ERROR = re.compile(r"\bLast error:\s*(?P<message>.*)$")
_BARE_NET = re.compile(r"^NET/\w+(?:/\w+)*\s*:")  # `NET/IB/GIN:` from 2.29 on
_SUSPECT_NAME = re.compile(r"^(?:docker[0-9]*|veth\w*|br-\w+|virbr[0-9]*|cni[0-9]*|flannel\S*|lo)$")
_SUSPECT_ADDRESS = (
    (re.compile(r"^fe80:", re.IGNORECASE), "link-local IPv6 address"),
    (re.compile(r"^127\."), "loopback address"),
    (re.compile(r"^::1$"), "loopback address"),
    (re.compile(r"^169\.254\."), "link-local IPv4 address"),
    (re.compile(r"^172\.17\."), "Docker's default bridge network"),
)
# What follows a wrapped WARN is a continuation only if it does not start a statement of its own.
_NEW_STATEMENT = re.compile(
    r"^(?:Traceback\b|File \"|\w+(?:Error|Exception|Warning)\b|Failed\b|terminate called|\[|[A-Z][a-z]+ [a-z]+ [a-z]+)"
)
_WRAP_WIDTH = 70


class SuspectInterface(Fact):
    """An interface NCCL chose that rarely connects GPU nodes: a container bridge, loopback, link-local."""

    host: str | None = None
    interface: str
    address: str | None = None
    reason: str
    line: int


class NcclDebug(NetSetup):
    """What an NCCL_DEBUG=INFO log says about the communication stack. Lists keep first-seen order."""

    nccl_version: str | None = None
    cuda_version: str | None = None
    cuda_driver_version: int | None = None
    network: str | None = None
    net_transports: list[str] = Field(default_factory=list)
    ib_devices: list[str] = Field(default_factory=list)
    ib_relaxed_ordering: bool | None = None
    oob_interfaces: list[str] = Field(default_factory=list)
    socket_interfaces: list[str] = Field(default_factory=list)
    ctrl_interfaces: list[str] = Field(default_factory=list)  # a plugin's control sockets (GPUDirect-TCPX), not data
    bootstrap: list[str] = Field(default_factory=list)  # the interfaces (name:address) the bootstrap used
    bootstrap_devices: list[str] = Field(default_factory=list)  # the out-of-band net devices (name:port) it used
    env: dict[str, str] = Field(default_factory=dict)
    plugins: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    hosts: list[str] = Field(default_factory=list)
    ranks: list[NcclTestRank] = Field(default_factory=list)
    log_lines: int = 0
    completion_errors: list[CompletionError] = Field(default_factory=list)
    communicators: list[Communicator] = Field(default_factory=list)
    suspect_interfaces: list[SuspectInterface] = Field(default_factory=list)
    nccl_versions_by_host: dict[str, str] = Field(default_factory=dict)
    ib_unavailable: list[str] = Field(default_factory=list)
    call_failures: list[CallFailure] = Field(default_factory=list)
    async_events: list[AsyncEvent] = Field(default_factory=list)
    net_paths: list[str] = Field(default_factory=list)  # networks ranks were connected through (`via NET/X`)
    links: list[Link] = Field(default_factory=list)  # connections per peer: channels and transport


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", version)[:2])


class _Log:
    def __init__(self) -> None:
        self.fields: dict[str, object] = {}
        self.network: str | None = None
        self.last_net: str | None = None
        self.lists: dict[str, list[str]] = {
            name: [] for name in ("net_transports", "ib_devices", "oob_interfaces", "socket_interfaces",
                                  "ctrl_interfaces", "bootstrap", "bootstrap_devices", "plugins", "hosts", "net_paths")
        }
        self.env: dict[str, str] = {}
        self.warnings: list[str] = []
        self.completions: list[CompletionError] = []
        self.calls: list[CallFailure] = []
        self.events: list[AsyncEvent] = []
        self.communicators: dict[tuple[str, str, str], dict[str, object]] = {}  # (host, pid, comm): per process
        self.networks: dict[tuple[str, ...], str] = {}  # (host, pid, tid) and (host, pid) -> last `Using network`
        self.comm_of: dict[tuple[str, str, str], tuple[str, str, str]] = {}  # (host, pid, tid) -> its comm
        self.suspects: list[SuspectInterface] = []
        self.versions: dict[str, str] = {}
        self.ib_unavailable: list[str] = []
        self.topology = Topology()

    def message(self, level: str, message: str, line: Line, who: re.Match[str] | None, host: str | None) -> None:
        message = message.strip()
        thread = (host, who.group("pid"), who.group("tid")) if who and host else None
        # A log without NCCL's prefixes is one process's: its lines share one thread.
        build_thread: Thread = (host or "", who.group("pid"), who.group("tid")) if who else (host or "", "", "")
        if level == "INFO":
            self.topology.read(message, build_thread, host, line.number)
        if level == "WARN":
            self.warnings.append(message)
        # The version line is the whole message: a 2.30 WARN names the version an application was compiled
        # with (`... compiled with NCCL version 2.30.7, but is running with NCCL library version 2.29.7.`).
        if message.startswith("NCCL version") and (version := split_nccl_version(message)):
            self.fields["nccl_version"], self.fields["cuda_version"] = version
            if host:
                self.versions[host] = version[0]
        elif m := _USING_NETWORK.match(message):
            self.network = m.group("name")
            if thread:
                self.networks[thread] = self.networks[thread[:2]] = m.group("name")
                if comm := self.comm_of.get(thread):
                    self.communicators[comm]["network"] = m.group("name")
        elif m := _COMM.search(message):
            key = (host or "", who.group("pid") if who else "", m.group("comm"))
            record = self.communicators.setdefault(key, {
                "comm": m.group("comm"), "rank": int(m.group("rank")), "nranks": int(m.group("nranks")),
                "host": host, "pid": int(who.group("pid")) if who else None, "line": line.number,
            })
            if thread:
                self.comm_of[thread] = key
                # The process's main thread may have chosen the network (2.7 to 2.18 init a comm on another).
                if record.get("network") is None:
                    record["network"] = self.networks.get(thread) or self.networks.get(thread[:2])
            self.topology.comm(record, message, build_thread)
        elif m := VIA_NET.match(message):
            self.lists["net_paths"].append(m.group("name"))
        elif m := _NET_INTERFACE.match(message):
            kind = "oob_interfaces" if m.group("name") == "IB" else "socket_interfaces"
            self.lists[kind].append(ADDRESS_TAIL.sub("", m.group("iface")))
            # 2.1 to 2.3 list every interface they use this way, `lo` among them where nothing excluded it.
            self._suspects(m.group("iface"), line, host)
        elif m := NET_USING.match(message):
            self._net(m.group("name"), m.group("rest"))
            self._suspects(m.group("rest"), line, host)
        elif ctrl := ctrl_interface(message):
            self.lists["ctrl_interfaces"].append(ctrl)
            self._suspects(ctrl, line, host)
        elif setup := net_setup(message):
            self.fields.update(setup)
        elif m := _NET_DEVICE.match(message):
            self.lists["ib_devices"].append(f"{m.group('device')}:{m.group('port')}/{m.group('layer')}")
        # No verbs library (2.3 on, `Failed to open libibverbs.so[.1]`): IB is out before it looks for a device.
        elif (message.startswith("NET/IB") and ("No device found" in message or "disabled" in message.lower())) \
                or message.startswith("Failed to open libibverbs"):
            self.ib_unavailable.append(message)
        elif m := _DRIVER.match(message):
            self.fields["cuda_driver_version"] = int(m.group("version"))
        elif (m := _BOOTSTRAP.match(message)) and _BOOTSTRAP_DEVICE.match(m.group("rest").strip()):
            self.lists["bootstrap_devices"].append(m.group("rest").strip())
        elif m := _BOOTSTRAP.match(message):
            self.lists["bootstrap"] += bootstrap_interfaces(m.group("rest"))
            self._suspects(m.group("rest"), line, host)
        elif m := _ENV.match(message):
            # NCCL ends some of these with a period (`set by environment to 0.`): not part of the value.
            value = m.group("value").strip()
            self.env[m.group("name")] = value[:-1] if value.endswith(".") and " " not in value else value
        elif _PLUGIN.search(message) and level != "WARN":
            self.lists["plugins"].append(message)

    def finish_warning(self, first: Line, host: str | None) -> None:
        """Read the structured parts of the warning that started on `first` (now that it is whole)."""
        message = self.warnings[-1]
        if error := completion(message, first.number, host):
            self.completions.append(error)
        elif event := async_event(message, first.number, host):
            self.events.append(event)
        elif failure := call_failure(message, first.number, host):
            self.calls.append(failure)

    def _suspects(self, rest: str, line: Line, host: str | None) -> None:
        for entry in bootstrap_interfaces(rest.replace(";", " ")):
            name, _, address = entry.partition(":")
            if not name or name.startswith("["):
                continue
            reason = "container or virtual bridge interface" if _SUSPECT_NAME.match(name) else None
            if name == "lo":
                reason = "loopback interface"
            for pattern, why in _SUSPECT_ADDRESS:
                if reason is None and address and pattern.match(address):
                    reason = why
            if reason and not any(s.interface == name and s.host == host for s in self.suspects):
                self.suspects.append(SuspectInterface(
                    host=host, interface=name, address=address or None, reason=reason, line=line.number,
                ))

    def _net(self, name: str, rest: str) -> None:
        found = using_lists(name, rest)
        for kind, values in found.items():
            self.lists[kind] += values
        if "ib_devices" not in found and "socket_interfaces" not in found:
            # NCCL 2.2x prints `NET/IB : Using [RO]; OOB eth0:...` after `No device found.`: IB listed no
            # device, so it is no transport here (and its flags describe nothing); the OOB interface stands.
            return
        self.last_net = name
        self.lists["net_transports"].append(name)
        if "ib_devices" in found and "[RO]" in rest:
            self.fields["ib_relaxed_ordering"] = True

    def chosen_network(self) -> str | None:
        if self.network:
            return self.network
        # NCCL <= 2.5 prints no `Using network`, and its NET/Socket line may name only the bootstrap
        # interface: there IB is the network whenever NET/IB found a device. Otherwise the last NET line.
        version = self.fields.get("nccl_version")
        if isinstance(version, str) and _version_tuple(version) <= (2, 5) and "IB" in self.lists["net_transports"]:
            return "IB"
        return self.last_net

    def build(self, ranks: list[NcclTestRank], log_lines: int, unparsed: list[Unplaced]) -> NcclDebug:
        lists = {name: unique(values) for name, values in self.lists.items()}
        return NcclDebug(
            network=self.chosen_network(),
            env=self.env,
            warnings=self.warnings,
            ranks=ranks,
            log_lines=log_lines,
            unplaced=unparsed,
            completion_errors=self.completions,
            call_failures=self.calls,
            async_events=self.events,
            communicators=[Communicator.model_validate(c) for c in self.communicators.values()],
            suspect_interfaces=self.suspects,
            nccl_versions_by_host=self.versions,
            links=self.topology.build(),
            ib_unavailable=unique(self.ib_unavailable),
            **lists,
            **self.fields,
        )


def _continues(previous: Line, line: Line) -> bool:
    """Whether `line` is the rest of a WARN a terminal wrapped after `previous`."""
    return (
        (len(previous.text) >= _WRAP_WIDTH or not re.search(r"[.!?)\]>]$", previous.text))
        and not line.text[:1].isspace()
        and not _NEW_STATEMENT.match(line.stripped)
        and not line.stripped.startswith("#")
        and not is_shell(line, KIND)
    )


def _is_failure(message: str) -> bool:
    """Whether a message NCCL's network layer printed is a completion error, an HCA event or a failed call."""
    return any(read(message, 0, None) is not None for read in (completion, async_event, call_failure))


def parse_nccl_debug(text: str) -> NcclDebug:
    log = _Log()
    ranks: list[NcclTestRank] = []
    unparsed: list[Unplaced] = []
    log_lines = 0
    # The WARN being read: its first line, its host, and its last line so far (a terminal may wrap it).
    warn: tuple[Line, str | None] | None = None
    warn_last: Line | None = None
    quoted = False  # a `Last error:` with nothing after it: the next line is the message

    def quote(message: str, line: Line) -> None:
        if message and message not in log.warnings:
            log.warnings.append(message)
            log.finish_warning(line, None)

    def end_warning() -> None:
        nonlocal warn, warn_last
        if warn is not None:
            log.finish_warning(*warn)
        warn, warn_last = None, None

    for line in split_lines(text):
        body = line.stripped
        if not body:
            end_warning()  # a wrapped line never leaves a blank line behind
            continue
        if m := nccl_log(body):
            end_warning()
            log_lines += 1
            who = _PREFIX.search(m.prefix)
            host = (who.group("host") if who else label_host(m.prefix)) or prefix_label(line.prefix) \
                or prefix_host(line.prefix) or prefix_arrow(line.prefix)
            if host:
                log.lists["hosts"].append(host)
            log.message(m.level, m.message, line, who, host)
            if m.level == "WARN":
                warn, warn_last = (line, host), line
            continue
        if warn_last is not None and _continues(warn_last, line):
            log.warnings[-1] = f"{log.warnings[-1]} {body}"
            warn_last = line
            continue
        end_warning()
        last = None if quoted else _LAST_ERROR.search(body)
        if quoted or last:
            message = last.group("message").strip() if last else body
            log_lines += 1
            quote(message, line)
            quoted = last is not None and not message
            continue
        if _BARE_NET.match(body) and _is_failure(body):
            log_lines += 1
            quote(body, line)
            continue
        if body.startswith("NCCL version") and (version := split_nccl_version(body)):
            log_lines += 1
            log.fields["nccl_version"], log.fields["cuda_version"] = version
            continue
        if body.startswith("#"):
            if rank := parse_rank(line):
                ranks.append(rank)
            continue
        if not is_shell(line, KIND):  # a prompt, or the nccl-tests command the log came from
            unparsed.append(Unplaced(line=line.number, text=line.text))
    end_warning()
    if not log_lines:
        lines = content_lines(text)
        first = lines[0] if lines else None
        fail(KIND, "no NCCL log line (NCCL INFO / NCCL WARN / NCCL version) found", first)
    return log.build(ranks, log_lines, unparsed)
