"""Parse NCCL_DEBUG=INFO logs: NCCL/CUDA versions, the network NCCL chose, its IB devices and interfaces,
environment it reports, plugin messages and warnings.

A log line contains `NCCL INFO|WARN|TRACE|ABORT`, usually after a `host:pid:tid [dev]` prefix (and a
`file.cc:123` location for WARN); `NCCL version X+cudaY` may stand alone. A line that is not a log line
and follows a WARN (or its continuation) continues that warning: terminals wrap long lines. nccl-tests
`#` lines are read for `#  Rank` entries. Logs are noisy, so any other line is recorded in `unparsed`
with its number, but input without a single NCCL line is not an NCCL log and raises ParseError.

`network` is the last `Using network X`, else the transport of the last `NET/X : Using [...]` line.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._text import Fact, content_lines, fail, is_prompt, split_lines, unique
from provisioner.parsers.nccl_tests import NcclTestRank, parse_rank, split_nccl_version

KIND = "nccl_debug"

_LOG = re.compile(r"(?:^|\s)NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b ?(?P<message>.*)$")
_PREFIX = re.compile(r"(?P<host>[^\s:]+):(?P<pid>[0-9]+):(?P<tid>[0-9]+)\s+\[(?P<dev>[^\]]*)\]", re.ASCII)
_USING_NETWORK = re.compile(r"^Using network (?P<name>\S+)")
_NET_USING = re.compile(r"^NET/(?P<name>\w+)\s*:\s*Using\s+(?P<rest>\[.*)$")
_NET_ENTRY = re.compile(r"\[[0-9]+\](?P<entry>\S+)")
_OOB = re.compile(r"\bOOB\s+(?P<iface>\S+)")
_DRIVER = re.compile(r"^cudaDriverVersion\s+(?P<version>[0-9]+)", re.ASCII)
_BOOTSTRAP = re.compile(r"^Bootstrap\s*:\s*Using\s+(?P<rest>.*)$")
_ENV = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*) set (?:by (?P<source>.+?) )?to (?P<value>.*)$")
_PLUGIN = re.compile(r"plugin", re.IGNORECASE)
_ADDRESS_TAIL = re.compile(r"<[0-9]+>$")


class UnparsedLine(Fact):
    line: int
    text: str


class NcclDebug(Fact):
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
    bootstrap: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    plugins: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    hosts: list[str] = Field(default_factory=list)
    ranks: list[NcclTestRank] = Field(default_factory=list)
    log_lines: int = 0
    unparsed: list[UnparsedLine] = Field(default_factory=list)


def _interfaces(rest: str) -> list[str]:
    # `[0]eth0:10.0.0.23<0>` -> `eth0:10.0.0.23`
    return [_ADDRESS_TAIL.sub("", m.group("entry")) for m in _NET_ENTRY.finditer(rest)]


def _bootstrap(rest: str) -> list[str]:
    # `ens7:10.128.0.33<0>`, older `[0]ens7:10.128.0.33<0>`; several interfaces are space separated.
    return [_ADDRESS_TAIL.sub("", re.sub(r"^\[[0-9]+\]", "", token)) for token in rest.split()]


class _Log:
    def __init__(self) -> None:
        self.fields: dict[str, object] = {}
        self.network: str | None = None
        self.last_net: str | None = None
        self.lists: dict[str, list[str]] = {
            name: [] for name in ("net_transports", "ib_devices", "oob_interfaces", "socket_interfaces",
                                  "bootstrap", "plugins", "hosts")
        }
        self.env: dict[str, str] = {}
        self.warnings: list[str] = []

    def message(self, level: str, message: str) -> None:
        message = message.strip()
        if level == "WARN":
            self.warnings.append(message)
        if version := split_nccl_version(message):
            self.fields["nccl_version"], self.fields["cuda_version"] = version
        elif m := _USING_NETWORK.match(message):
            self.network = m.group("name")
        elif m := _NET_USING.match(message):
            self._net(m.group("name"), m.group("rest"))
        elif m := _DRIVER.match(message):
            self.fields["cuda_driver_version"] = int(m.group("version"))
        elif m := _BOOTSTRAP.match(message):
            self.lists["bootstrap"] += _bootstrap(m.group("rest"))
        elif m := _ENV.match(message):
            self.env[m.group("name")] = m.group("value").strip()
        elif _PLUGIN.search(message) and level != "WARN":
            self.lists["plugins"].append(message)

    def _net(self, name: str, rest: str) -> None:
        self.last_net = name
        self.lists["net_transports"].append(name)
        entries = _interfaces(rest)
        if name == "IB":
            self.lists["ib_devices"] += entries
            if "[RO]" in rest:
                self.fields["ib_relaxed_ordering"] = True
            if oob := _OOB.search(rest):
                self.lists["oob_interfaces"].append(_ADDRESS_TAIL.sub("", oob.group("iface")))
        else:
            self.lists["socket_interfaces"] += entries

    def build(self, ranks: list[NcclTestRank], log_lines: int, unparsed: list[UnparsedLine]) -> NcclDebug:
        lists = {name: unique(values) for name, values in self.lists.items()}
        return NcclDebug(
            network=self.network or self.last_net,
            env=self.env,
            warnings=self.warnings,
            ranks=ranks,
            log_lines=log_lines,
            unparsed=unparsed,
            **lists,  # type: ignore[arg-type]
            **self.fields,  # type: ignore[arg-type]
        )


def parse_nccl_debug(text: str) -> NcclDebug:
    log = _Log()
    ranks: list[NcclTestRank] = []
    unparsed: list[UnparsedLine] = []
    log_lines = 0
    continuing_warning = False
    for line in split_lines(text):
        body = line.stripped
        if not body:
            continuing_warning = False  # a wrapped line never leaves a blank line behind
            continue
        if m := _LOG.search(body):
            log_lines += 1
            prefix = body[: m.start()]
            if host := _PREFIX.search(prefix):
                log.lists["hosts"].append(host.group("host"))
            log.message(m.group("level"), m.group("message"))
            continuing_warning = m.group("level") == "WARN"
            continue
        if body.startswith("NCCL version") and (version := split_nccl_version(body)):
            log_lines += 1
            log.fields["nccl_version"], log.fields["cuda_version"] = version
            continuing_warning = False
            continue
        if continuing_warning and not body.startswith("#") and not is_prompt(line):
            log.warnings[-1] = f"{log.warnings[-1]} {body}"
            continue
        continuing_warning = False
        if body.startswith("#"):
            if rank := parse_rank(line):
                ranks.append(rank)
            continue
        unparsed.append(UnparsedLine(line=line.number, text=line.text))
    if not log_lines:
        lines = content_lines(text)
        first = lines[0] if lines else None
        fail(KIND, "no NCCL log line (NCCL INFO / NCCL WARN / NCCL version) found", first)
    return log.build(ranks, log_lines, unparsed)
