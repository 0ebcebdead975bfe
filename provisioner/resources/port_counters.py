"""`port_counters`: the IB/RoCE port error counters an SRE watches, against the playbook's limits.

Counters are read in the host's one exec: from sysfs (`class/infiniband/*/ports/*/counters` and
`hw_counters` under fabnet_sysfs_root) with one `grep`, or with `perfquery -x -C DEV -P PORT`. A
`max_rate` limit reads twice within the same exec, `interval` seconds apart, and compares the increase
per second: a counter that is high but no longer growing is old damage, one that grows is a live fault.
Each check names the port and the counter (`mlx5_0/1 symbol_error`).
"""

from __future__ import annotations

from provisioner.errors import ParseError
from provisioner.load.specs import PortCountersSpec
from provisioner.parsers._text import require_complete
from provisioner.parsers.port_counters import PortCounters, PortCounterSet, parse_perfquery, parse_port_counters
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    drift,
    error,
    ok,
    sh,
    stdout_of,
)

KIND = "port_counters"

def _read(spec: PortCountersSpec) -> str:
    # Globs stay unquoted so the remote shell expands them; the device name is quoted inside the path.
    device = sh(spec.device) if spec.device else "*"
    port = str(spec.port) if spec.port is not None else "*"
    paths = " ".join(f"{device}/ports/{port}/{group}" for group in ("counters", "hw_counters"))
    # Unreadable files (some hw_counters are write-only) and a missing hw_counters group are not errors.
    return f"grep -r -H . {paths} 2>/dev/null"


def _probe(spec: PortCountersSpec, ctx: HostContext) -> Probe:
    interval = f"{spec.interval:g}"
    if spec.source == "perfquery":
        read = sh("perfquery", "-x", "-C", spec.device or "", "-P", str(spec.port))
        if spec.max_rate:
            return Probe(f"{read} && echo {sh('@@interval ' + interval)} && sleep {sh(interval)} && {read}",
                         timeout=30 + spec.interval)
        return Probe(read)
    read = _read(spec)
    body = f"{read}; echo {sh('@@interval ' + interval)}; sleep {sh(interval)}; {read}" if spec.max_rate else read
    return Probe(f"cd -- {sh(ctx.sysfs_root.rstrip('/') + '/class/infiniband')} && {{ {body}; true; }}",
                 timeout=30 + (spec.interval if spec.max_rate else 0))


def probes(spec: PortCountersSpec, ctx: HostContext) -> list[Probe]:
    return [_probe(spec, ctx)]


def _split_perfquery(text: str) -> PortCounters:
    first, sep, second = text.partition("@@interval")
    parsed = parse_perfquery(first)
    if not sep:
        return parsed
    seconds, _, rest = second.partition("\n")
    later = parse_perfquery(rest)
    return parsed.model_copy(update={"interval_s": float(seconds.strip()), "later": later.ports,
                                     "unplaced": parsed.unplaced + later.unplaced,
                                     "missing": parsed.missing + later.missing,
                                     "complete": parsed.complete and later.complete})


def _name(spec: PortCountersSpec, port: PortCounterSet) -> str:
    return f"{port.device or spec.device or 'lid ' + str(port.lid)}/{port.port}"


def _limit_checks(spec: PortCountersSpec, port: PortCounterSet, later: PortCounterSet | None,
                  interval: float | None) -> list[Check]:
    where = _name(spec, port)
    checks: list[Check] = []
    limit: float  # the counts' limits are whole numbers, the rates' fractions
    for counter, limit in spec.max.items():
        value = port.value(counter)
        attribute = f"{where} {counter}"
        if value is None:
            checks.append(error(attribute, f"<= {limit}", f"{where} has no counter {counter}"))
        else:
            checks.append((ok if value <= limit else drift)(attribute, f"<= {limit}", value))
    for counter, limit in spec.max_rate.items():
        attribute = f"{where} {counter} rate"
        before = port.value(counter)
        after = later.value(counter) if later else None
        if before is None or after is None or not interval:
            checks.append(error(attribute, f"<= {limit:g}/s", f"{where} has no counter {counter} in both readings"))
            continue
        if counter in port.saturated or (later is not None and counter in later.saturated):
            # A counter at the top of its width stops counting: its increase reads 0 however bad the link.
            checks.append(error(attribute, f"<= {limit:g}/s",
                                f"{where} {counter} is stuck at its maximum ({after}): its rate cannot be measured "
                                "until the port's counters are reset (perfquery -R)"))
            continue
        rate = (after - before) / interval
        message = f"{after - before} in {interval:g} s"
        checks.append((ok if rate <= limit else drift)(attribute, f"<= {limit:g}/s", f"{rate:g}/s", message))
    return checks


def _attributes(spec: PortCountersSpec) -> list[tuple[str, str]]:
    return ([(c, f"<= {v}") for c, v in spec.max.items()]
            + [(f"{c} rate", f"<= {v:g}/s") for c, v in spec.max_rate.items()])


def evaluate(spec: PortCountersSpec, results: Results, ctx: HostContext) -> list[Check]:
    probe = _probe(spec, ctx)
    try:
        text = stdout_of(results, probe, "reading port counters")
        parsed = _split_perfquery(text) if spec.source == "perfquery" else parse_port_counters(text)
        parsed = require_complete(parsed, spec.source)
    except (ProbeFailed, ParseError) as exc:
        message = str(exc)
        if spec.source == "sysfs" and "exit code" in message:
            message = f"no {ctx.sysfs_root.rstrip('/')}/class/infiniband on the host ({message})"
        return [error(attribute, desired, message) for attribute, desired in _attributes(spec)]
    ports = [p for p in parsed.ports if (spec.device is None or p.device in (None, spec.device))
             and (spec.port is None or p.port == spec.port)]
    if not ports:
        where = f"{spec.device or 'any device'}" + (f" port {spec.port}" if spec.port else "")
        return [error(attribute, desired, f"no counters found for {where}")
                for attribute, desired in _attributes(spec)]
    later = {(p.device, p.port): p for p in parsed.later}
    checks: list[Check] = []
    for port in ports:
        checks += _limit_checks(spec, port, later.get((port.device, port.port)), parsed.interval_s)
    return checks


RESOURCE = ResourceType(KIND, PortCountersSpec, probes, evaluate, examples=(
    {"device": "mlx5_0", "port": 1, "max": {"symbol_error": 0, "link_downed": 0},
     "max_rate": {"port_rcv_errors": 0.5}, "interval": 2.0, "source": "sysfs"},
))
