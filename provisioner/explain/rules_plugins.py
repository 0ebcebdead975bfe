"""What NCCL's external network plugins and CollNet (SHARP in-network reduction) say when they do not start: both
fall back without stopping the job, so the log is the only place the slow path shows.

Wording read (NCCL's plugin loader across releases): with no plugin installed NCCL says so in an INFO line and uses
its internal IB/socket transports, which is normal (`No plugin found (libnccl-net.so)` to 2.22, `Plugin load
(libnccl-net.so) returned 2 : ...` 2.12 to 2.18, `dlerror=... No plugin found` in 2.19, `Could not find:
libnccl-net.so` from 2.23). A failure is a plugin asked for by name (NCCL_NET_PLUGIN, logged as `Plugin name set by
env to` to 2.25 and `NCCL_NET_PLUGIN set by environment to` after) that is not found, one that is found but cannot
load (a library it needs is missing, an undefined symbol), or one that offers no API version this NCCL reads
(`Failed to find ncclNetPlugin symbol (v4 or v5)` / `(>= v5)` to 2.27, `External network plugin ... is unsupported`
from 2.28). `Failed to find ncclNetPlugin_v8 symbol.` alone only means NCCL tries an older version next.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

# The names looked for when none is asked for (RCCL looks for its own).
_DEFAULTS = ("libnccl-net.so", "librccl-net.so")
_NAMED = re.compile(r"NET/Plugin\s*: Plugin name set by env to (?P<name>\S+)|NCCL_NET_PLUGIN set by environment to "
                    r"(?P<env>\S+)")
_MISSING = re.compile(r"NET/Plugin\s*: (?:.*No plugin found|Could not find:|Plugin load (?:\(\S+\) )?returned|"
                      r"Most recent plugin load returned)")
# A library the plugin needs, or a symbol it needs, is not there: the plugin file itself was found.
_BROKEN = re.compile(r"NET/Plugin\s*:.*?(?:(?P<lib>[\w./+-]+\.so[\w.]*): cannot open shared object file|"
                     r"undefined symbol: (?P<symbol>\S+)|wrong ELF class|version `[^']+' not found)")
_NO_API = re.compile(r"NET/Plugin\s*: Failed to find ncclNetPlugin symbol \((?:v4 or v5|>= v5)\)|"
                     r"External network plugin (?P<path>\S+) is unsupported")
_NONE_INIT = re.compile(r"Failed to initialize any NET plugin")
_LIBS = re.compile(r"lib[\w+-]*(?:\.[\w+-]+)*?\.so")


def _requested(logs: list[Log]) -> str | None:
    for _, m in grep(logs, _NAMED):
        name = m["name"] or m["env"] or ""
        if name.rstrip(".").lower() not in ("", "none", *_DEFAULTS):
            return name.rstrip(".")
    for log in logs:
        value = (log.nccl.env.get("NCCL_NET_PLUGIN") if log.nccl else None) or ""
        if value.lower() not in ("", "none", *_DEFAULTS):
            return value
    return None


def _fallback_lines(logs: list[Log]) -> tuple[list[LogLine], list[LogLine], list[LogLine], list[str]]:
    """(lines saying a plugin was not found, lines saying one was found and could not load, lines saying one offers
    no API this NCCL reads, the libraries those lines name other than the default)."""
    missing, broken, no_api = [], [], []
    names: list[str] = []
    for line, m in grep(logs, _BROKEN):
        lib = m["lib"] or ""
        if lib and re.search(r"lib[nr]ccl-net", lib) and "No such file" in line.text:
            continue  # the plugin itself is absent: read as missing below
        broken.append(line)
    for line, _ in grep(logs, _MISSING):
        if line not in broken:
            missing.append(line)
            names += [n for n in _LIBS.findall(line.text) if n not in _DEFAULTS]
    no_api = [line for line, _ in grep(logs, _NO_API)]
    return missing, broken, no_api, unique(names)


def plugin_failed(logs: list[Log]) -> bool:
    """Whether a network plugin was wanted and NCCL fell back to its internal transports: asked for by name and
    not used, found but not loadable, or (asked for) with no API this NCCL reads. No plugin at all is normal."""
    missing, broken, no_api, names = _fallback_lines(logs)
    wanted = _requested(logs) is not None or bool(names)
    return bool(broken) or (wanted and bool(missing or no_api))


def net_plugin(logs: list[Log]) -> list[Cause]:
    causes: list[Cause] = []
    none = [line for line, _ in grep(logs, _NONE_INIT)]
    if none:
        causes.append(Cause(
            id="net-plugin-none", title="NCCL could start no network transport (no NET plugin initialised)",
            detail=f"On {', '.join(hosts(none)) or 'a host'} neither an external network plugin nor NCCL's own "
                   "IB or socket transport initialised, so the communicator could not be created.",
            fix="Check what restricts the choice: NCCL_NET (IB / Socket / a plugin's name) naming a transport this "
                "host lacks, NCCL_NET_PLUGIN naming plugins none of which load, NCCL_IB_DISABLE=1 together with "
                "no usable interface for sockets (NCCL_SOCKET_IFNAME). Unset them and read the `NET/` lines.",
            score=85, hosts=hosts(none), settings=["NCCL_NET", "NCCL_NET_PLUGIN"], evidence=evidence(none),
        ))
    missing, broken, no_api, names = _fallback_lines(logs)
    wanted = _requested(logs) or (names[0] if names else None)
    if not broken and not (wanted and (missing or no_api)):
        return causes
    lines = broken + no_api + missing if broken else no_api + missing
    what = f"NCCL_NET_PLUGIN={wanted}" if wanted else "the network plugin installed on the host"
    why = ("it was found but could not load (a library it needs is missing, or a symbol: see the line)" if broken
           else "it offers no plugin API version this NCCL release reads (plugin built for another release)"
           if no_api else "no library of that name is on the library path")
    causes.append(Cause(
        id="net-plugin-not-loaded",
        title=f"{what} was not loaded: NCCL fell back to its internal network",
        detail=f"{why}. NCCL goes on without it and without an error: on fabrics served only through a plugin "
               "(AWS EFA with aws-ofi-nccl, GPUDirect-TCPX/FasTrak, the SHARP plugin for CollNet) collectives then "
               "run over TCP sockets or without in-network reduction, at a fraction of the bandwidth.",
        fix="Run `ldd` on the plugin library in the job's environment to find what it cannot resolve; put its "
            "directory on LD_LIBRARY_PATH; NCCL_NET_PLUGIN=foo looks for libnccl-net-foo.so (or an absolute path, "
            "not a relative one); use a plugin built for this NCCL release (each release reads a window of plugin API "
            "versions: 2.30 reads v6 to v12). `NCCL_DEBUG_SUBSYS=INIT,NET` shows `Loaded net plugin` once it works.",
        score=55, hosts=hosts(lines), settings=[f"NCCL_NET_PLUGIN={wanted}" if wanted else "NCCL_NET_PLUGIN"],
        evidence=evidence(lines),
    ))
    return causes


_SHARP = re.compile(r"(?:sharp_plugin\.c:\d+ NCCL WARN|NCCL WARN .*SHARP).*?(?P<why>SHARP (?:coll init error|group "
                    r"create|coll comm init|comm create)[^\n]*)")
_COLLNET = re.compile(r"Cannot initialize CollNet, using point-to-point network instead")


def collnet(logs: list[Log]) -> list[Cause]:
    """SHARP (CollNet) asked for and not set up: NCCL's own line and the SHARP plugin's reason."""
    sharp = grep(logs, _SHARP)
    fallback = [line for line, _ in grep(logs, _COLLNET)]
    if not sharp and not fallback:
        return []
    lines = [line for line, _ in sharp] + fallback
    reasons = unique([m["why"].strip() for _, m in sharp])
    text = " ".join(reasons)
    if "job" in text.lower():
        fix = ("SHARP could not register the job with the aggregation manager: check that the switches offer "
               "SHARP at all (many cloud fabrics do not), that sharp_am runs beside the subnet manager "
               "(`systemctl status sharp_am`), and that `sharp_hello -d <hca>:1` passes from this node. ")
    elif "tree" in text.lower() or "lock" in text.lower():
        fix = ("The streaming aggregation tree (SAT) was not granted: another job holds it or the manager offers "
               "none to this job. SHARP_COLL_ENABLE_SAT=0 keeps the low-latency trees only; otherwise run one "
               "SHARP job at a time on that tree. ")
    else:
        fix = "Check SHARP on the fabric: sharp_am beside the subnet manager and `sharp_hello -d <hca>:1`. "
    return [Cause(
        id="collnet-unavailable",
        title="SHARP in-network reduction (CollNet) could not start: NCCL used point-to-point instead",
        detail=(f"The SHARP plugin said: {'; '.join(reasons[:2])}. " if reasons else "")
        + "NCCL then runs the collectives over the network point-to-point, without the switches' reduction "
          "(slower than asked for, not a failure of the links).",
        fix=fix + "Unset NCCL_COLLNET_ENABLE where SHARP is not offered, so the job does not ask for it.",
        score=48, hosts=hosts(lines), settings=["NCCL_COLLNET_ENABLE"], evidence=evidence(lines),
    )]


def plugins(logs: list[Log]) -> list[Cause]:
    return net_plugin(logs) + collnet(logs)
