"""NCCL versions that differ: between the hosts or ranks of one job (each host's own `NCCL version` line,
NCCL's version-code check, RAS's remote-peer check), or between the NCCL an application was built against
and the one it loads.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

# `NCCL version 2.18.1+cuda12.1` (INFO, or alone on stdout), torch's `NCCL version: 2.18.3` / `, NCCL version
# 2.19.3`; NCCL's own checks: `Mismatched NCCL version detected : rank 0 version 22304 rank 5 version 21903`
# (2.23 on, version codes) and RAS's `NCCL version mismatch with remote peer X<port> (local: A, remote B)` (2.30).
_VERSION = re.compile(r"NCCL version:?\s*(?P<version>[0-9]+\.[0-9]+\.[0-9]+)")
_CODES = re.compile(r"Mismatched NCCL version detected\s*:\s*rank (?P<a>[0-9]+) version (?P<va>[0-9]+)\s+"
                    r"rank (?P<b>[0-9]+) version (?P<vb>[0-9]+)")
# An application built against one NCCL and running with another (device API, 2.29 on): `... was compiled with
# NCCL version 22907, but is running with NCCL library version 22803.` (2.29.7, version codes), `NCCL library is
# too old. This application was compiled with NCCL version 2.30.7, but is running with NCCL library version
# 2.29.7.` and `... not backwards compatible ...` (2.30.7 dev_runtime.cc, devcomm/).
_BUILT = re.compile(r"compiled with NCCL version (?P<built>[0-9][0-9.]*?)\.?,? but is running\s+with NCCL "
                    r"(?:library )?version (?P<run>[0-9][0-9.]*[0-9])")
_REMOTE = re.compile(r"NCCL version mismatch with remote peer (?P<peer>[^\s<]+)(?:<[0-9]+>)?\s*"
                     r"\(local:\s*(?P<local>[0-9.]+),\s*remote:?\s*(?P<remote>[0-9.]+)\)")


def _from_code(code: int) -> str:
    """NCCL_VERSION_CODE: X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _version(text: str) -> str:
    return text if "." in text else _from_code(int(text))


def _built_for_another(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _BUILT)
    if not hits:
        return []
    pairs = unique([f"compiled with {_version(m['built'])}, running with {_version(m['run'])}" for _, m in hits])
    lines = [line for line, _ in hits]
    return [Cause(
        id="nccl-version-mismatch", title="the application was built against another NCCL than the one it loads",
        detail=f"{'; '.join(pairs)}: the NCCL device API the application was compiled with is not the one the "
               "libnccl it loads at run time provides, so NCCL refused the communicator (invalid usage).",
        fix="Run with the libnccl the application was built against (check `ldd` / LD_LIBRARY_PATH and the "
            "container's NCCL), or rebuild the application against the NCCL installed on the nodes (playbook: "
            "nccl: {version: '==X.Y.Z'}); every node must load the same libnccl.",
        score=80, hosts=hosts(lines), evidence=evidence(lines),
    )]


def version_mismatch(logs: list[Log]) -> list[Cause]:
    if built := _built_for_another(logs):
        return built
    by_who: dict[str, str] = {}
    lines: list[LogLine] = []
    for log in logs:
        if log.nccl:
            by_who.update(log.nccl.nccl_versions_by_host)
            names = log.nccl.hosts
            if log.nccl.nccl_version and len(names) == 1 and names[0] not in by_who:
                by_who[names[0]] = log.nccl.nccl_version
        # Each line's own version, by the host or launcher task it came from, or for a bare stdout line (NCCL
        # printed it with printf, once per process, until 2.23) the host whose output surrounds it.
        for line, m in log.grep(_VERSION):
            who = line.host or (f"rank {line.rank}" if line.rank is not None else None) or log.surrounding_host(line)
            if who:
                by_who.setdefault(who, m.group("version"))
            lines.append(line)
    peers: list[str] = []
    for line, m in grep(logs, _CODES):
        by_who[f"rank {m['a']}"], by_who[f"rank {m['b']}"] = _from_code(int(m["va"])), _from_code(int(m["vb"]))
        lines.append(line)
    for line, m in grep(logs, _REMOTE):
        by_who[line.host or "this host"], by_who[m["peer"]] = m["local"], m["remote"]
        peers.append(m["peer"])
        lines.append(line)
    if len(set(by_who.values())) < 2:
        return []
    listing = ", ".join(f"{who} {version}" for who, version in sorted(by_who.items()))
    return [Cause(
        id="nccl-version-mismatch", title="hosts run different NCCL versions",
        detail=f"{listing}: ranks of one job must run the same NCCL; protocols differ between versions.",
        fix="Install one NCCL version on every node (playbook: nccl: {version: '==X.Y.Z'}) and rebuild the "
            "job's environment so it loads that libnccl.",
        score=75, hosts=unique([w for w in sorted(by_who) if not w.startswith("rank ") and w not in peers]
                               + hosts(lines)),
        addresses=unique(peers), evidence=evidence(lines),
    )]
