"""`port_counters`: the IB/RoCE port error counters an SRE watches, against the playbook's limits.

Counters are read in the host's one exec: from sysfs (`class/infiniband/*/ports/*/counters` and
`hw_counters` under fabnet_sysfs_root) with one `grep`, or with `perfquery -x -C DEV -P PORT`. A
`max_rate` limit reads twice within the same exec, `interval` seconds apart, and compares the increase
per second: a counter that is high but no longer growing is old damage, one that grows is a live fault.
Each check names the port and the counter (`mlx5_0/1 symbol_error`). A counter file the kernel could not read
(`N/A (no PMA)` on a device without a performance-management agent, `Permission denied`) is a check that could
not be made: an error with what the host printed, never a zero and never a counter the port lacks. So is a
counter whose whole folder could not be read (`grep: mlx5_0/ports/1/counters: Permission denied`): the error
names the folder and what was printed.

Some drivers keep counters for the whole device in `DEVICE/hw_counters` (AWS EFA's `cmds_err`, `create_qp_err`;
hfi1's `RcvOverflow,32`; mlx5's RoCE counters in switchdev mode). The same grep reads that file for each named
counter but the IB PortCounters (per port only), and a limit on a counter the port lacks is judged once on the
device's (`efa_0 cmds_err`, its text saying it is the device's own).

On RoCE the counters that say whether lossless Ethernet works live only in the NIC driver's statistics
(`rx_discards_phy`, `tx_pause_storm_error_events`, `rx_prio3_pause` on mlx5; other drivers name theirs
differently): `source: ethtool` reads `ethtool -S IFACE` and checks them by the names ethtool prints
(`eth1 rx_discards_phy`). A name the driver does not print is an error that lists the closest ones it does.
"""

from __future__ import annotations

import re

from provisioner.errors import ParseError, did_you_mean
from provisioner.load.specs import PortCountersSpec
from provisioner.parsers._text import require_complete
from provisioner.parsers.ethtool_stats import EthtoolStats, parse_ethtool_stats
from provisioner.parsers.port_counters import (
    COUNTER_BITS,
    PERFQUERY_NAMES,
    DeviceCounterSet,
    PortCounters,
    PortCounterSet,
    parse_perfquery,
    parse_port_counters,
)
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
# The ring or queue number in a driver's per-queue counter: `[3]: rx_discards` (bnxt_en), `rx_queue_3_packets`.
_PER_QUEUE = re.compile(r"^\[[0-9]+\]|(?<=_queue_)[0-9]+(?=_)")

def _device_names(spec: PortCountersSpec) -> list[str]:
    """The named counters a driver may keep for the whole device: all but the IB PortCounters, which the
    kernel serves per port only (so a spec naming only those reads what it always read)."""
    return [name for name in {**spec.max, **spec.max_rate} if name not in COUNTER_BITS
            and name not in PERFQUERY_NAMES.values()]


def _read(spec: PortCountersSpec) -> str:
    # Globs stay unquoted so the remote shell expands them; the device name is quoted inside the path.
    device = sh(spec.device) if spec.device else "*"
    port = str(spec.port) if spec.port is not None else "*"
    paths = [f"{device}/ports/{port}/{group}" for group in ("counters", "hw_counters")]
    # A device's own counters by name only: an hfi1 device has about a thousand, and the check needs a few.
    paths += [f"{device}/hw_counters/{sh(name)}" for name in _device_names(spec)]
    # stderr joins stdout: grep's `grep: PATH: REASON` is what tells a file the kernel refused (a write-only or
    # broken hw_counter: Permission denied, Input/output error; or a whole folder of them, whose counters are then
    # unreadable too), which the parser marks unreadable, from an
    # unmatched path (no hw_counters group, a counter the device does not keep: No such file or directory), which
    # it marks absent. grep flushes its output before each message, so a message never lands inside a counter
    # line; its exit status 2 for those messages is dropped by the probe's `true`.
    return f"grep -r -H . {' '.join(paths)} 2>&1"


def _probe(spec: PortCountersSpec, ctx: HostContext) -> Probe:
    interval = f"{spec.interval:g}"
    if spec.source in ("perfquery", "ethtool"):
        read = (sh("ethtool", "-S", spec.interface or "") if spec.source == "ethtool"
                else sh("perfquery", "-x", "-C", spec.device or "", "-P", str(spec.port)))
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


_Counters = PortCounterSet | DeviceCounterSet


def _limits(spec: PortCountersSpec) -> list[tuple[str, float, bool]]:
    """(counter, limit, is a rate) in the playbook's order: the counts, then the rates."""
    return ([(c, v, False) for c, v in spec.max.items()] + [(c, v, True) for c, v in spec.max_rate.items()])


def _has(counters: _Counters, name: str) -> bool:
    """The set holds the counter, read or not: a file the kernel could not read is still the set's own, and so is
    one in a folder of the set the host could not read."""
    return counters.value(name) is not None or name in counters.unreadable or counters.unread_folder(name) is not None


def _unreadable(where: str, counter: str, *readings: _Counters | None) -> str | None:
    """Why the counter has no value where the host printed something else instead (`N/A (no PMA)`, `Permission
    denied`): the check could not be made, which is neither a value over the limit nor a counter that is not there."""
    for reading in readings:
        if reading is not None and counter in reading.unreadable:
            return f"cannot read {where} {counter}: the host printed {reading.unreadable[counter]!r}"
        if reading is not None and (folder := reading.unread_folder(counter)):
            return f"cannot read {where} {counter}: the host could not read {folder[0]} and printed {folder[1]!r}"
    return None


def _check(where: str, counter: str, limit: float, rate: bool, now: _Counters, later: _Counters | None,
           interval: float | None, lacking: str) -> Check:
    """One limit against one port's counters or, where the port has no such counter, its device's own."""
    attribute, desired = (f"{where} {counter} rate", f"<= {limit:g}/s") if rate else (f"{where} {counter}",
                                                                                      f"<= {limit}")
    own = isinstance(now, DeviceCounterSet)
    # Every port of the device shares such a counter: say so, or a reader looks for the port that erred.
    note = f"the device's own counter ({where}/hw_counters/{counter}), not a port's" if own else ""
    before = now.value(counter)
    if not rate:
        if before is None:
            return error(attribute, desired, _unreadable(where, counter, now) or lacking)
        return (ok if before <= limit else drift)(attribute, desired, before, note)
    after = later.value(counter) if later else None
    if (before is None or after is None) and (cannot := _unreadable(where, counter, now, later)):
        return error(attribute, desired, cannot)
    if before is None or after is None or not interval:
        return error(attribute, desired, f"{lacking} in both readings")
    if counter in now.saturated or (later is not None and counter in later.saturated):
        # A counter at the top of its width stops counting: its increase reads 0 however bad the link.
        reset = ("the device's counters are reset (reloading its driver)" if own
                 else "the port's counters are reset (perfquery -R)")
        return error(attribute, desired, f"{where} {counter} is stuck at its maximum ({after}): its rate cannot "
                     f"be measured until {reset}")
    return _rate(f"{where} {counter}", limit, before, after, interval, note)


def _rate(subject: str, limit: float, before: int, after: int, interval: float, note: str = "") -> Check:
    attribute, desired = f"{subject} rate", f"<= {limit:g}/s"
    if after < before:
        # A driver reload or a port reset zeroes the counters: the difference says nothing about the link, and a
        # negative rate would pass any limit.
        return error(attribute, desired, f"{subject} went down from {before} to {after} between the readings: "
                     "the counters were reset; check again")
    rate = (after - before) / interval
    return (ok if rate <= limit else drift)(attribute, desired, f"{rate:g}/s",
                                            f"{after - before} in {interval:g} s" + (f"; {note}" if note else ""))


def _counter_checks(spec: PortCountersSpec, parsed: PortCounters, ports: list[PortCounterSet]) -> list[Check]:
    """Each port's limits; a counter the port lacks is judged once on its device's own set, if it has one."""
    devices = {d.device: d for d in parsed.devices if spec.device in (None, d.device)}
    later_devices = {d.device: d for d in parsed.later_devices}
    later = {(p.device, p.port): p for p in parsed.later}
    checks: list[Check] = []
    judged: set[tuple[str, str, bool]] = set()
    for port in ports:
        device = devices.get(port.device or "")
        for counter, limit, rate in _limits(spec):
            if device is None or _has(port, counter) or not _has(device, counter):
                where = _name(spec, port)
                checks.append(_check(where, counter, limit, rate, port, later.get((port.device, port.port)),
                                     parsed.interval_s, f"{where} has no counter {counter}"))
            elif (device.device, counter, rate) not in judged:
                judged.add((device.device, counter, rate))
                checks.append(_check(device.device, counter, limit, rate, device,
                                     later_devices.get(device.device), parsed.interval_s,
                                     f"{device.device} has no counter {counter} of its own"))
    # A device whose ports were not read (none, or not the spec's port) still has its own counters judged.
    seen = {port.device for port in ports}
    for name, device in devices.items():
        if name in seen:
            continue
        lacking = f"no counters found for {name} port {spec.port}" if spec.port else f"no port counters for {name}"
        for counter, limit, rate in _limits(spec):
            checks.append(_check(name, counter, limit, rate, device, later_devices.get(name), parsed.interval_s,
                                 f"{lacking}, and it has no counter {counter} of its own"))
    return checks


def _attributes(spec: PortCountersSpec) -> list[tuple[str, str]]:
    return ([(c, f"<= {v}") for c, v in spec.max.items()]
            + [(f"{c} rate", f"<= {v:g}/s") for c, v in spec.max_rate.items()])


def _ethtool_checks(spec: PortCountersSpec, stats: EthtoolStats) -> list[Check]:
    where = spec.interface or ""
    checks: list[Check] = []

    def absent(counter: str, reading: dict[str, int]) -> str:
        # Drivers name the same fault differently (mlx5 rx_discards_phy, bnxt_en rx_stat_discard): say what is
        # there. Per-ring and per-queue copies of one counter would fill the hint, so one of each is offered.
        shapes: dict[str, str] = {}
        for name in reading:
            shapes.setdefault(_PER_QUEUE.sub("#", name), name)
        return f"{where} has no counter {counter}" + did_you_mean(counter, shapes.values(), n=3)

    limit: float
    for counter, limit in spec.max.items():
        attribute, value = f"{where} {counter}", stats.counters.get(counter)
        if value is None:
            checks.append(error(attribute, f"<= {limit}", absent(counter, stats.counters)))
        elif counter in stats.repeated:
            checks.append(error(attribute, f"<= {limit}", f"{where} prints {counter} more than once"))
        else:
            checks.append((ok if value <= limit else drift)(attribute, f"<= {limit}", value))
    for counter, limit in spec.max_rate.items():
        attribute, desired = f"{where} {counter} rate", f"<= {limit:g}/s"
        before, after, interval = stats.counters.get(counter), stats.later.get(counter), stats.interval_s
        if before is None or after is None or not interval:
            checks.append(error(attribute, desired, absent(counter, stats.counters if before is None else stats.later)))
        elif counter in stats.repeated:
            checks.append(error(attribute, desired, f"{where} prints {counter} more than once"))
        else:
            checks.append(_rate(f"{where} {counter}", limit, before, after, interval))
    return checks


def evaluate(spec: PortCountersSpec, results: Results, ctx: HostContext) -> list[Check]:
    probe = _probe(spec, ctx)
    if spec.source == "ethtool":
        try:
            stats = require_complete(parse_ethtool_stats(stdout_of(results, probe, "reading ethtool -S")),
                                     "ethtool_stats")
        except (ProbeFailed, ParseError) as exc:
            return [error(f"{spec.interface} {attribute}", desired, str(exc))
                    for attribute, desired in _attributes(spec)]
        return _ethtool_checks(spec, stats)
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
    if not ports and not any(spec.device in (None, d.device) for d in parsed.devices):
        where = f"{spec.device or 'any device'}" + (f" port {spec.port}" if spec.port else "")
        return [error(attribute, desired, f"no counters found for {where}")
                for attribute, desired in _attributes(spec)]
    return _counter_checks(spec, parsed, ports)


RESOURCE = ResourceType(KIND, PortCountersSpec, probes, evaluate, examples=(
    {"device": "mlx5_0", "port": 1, "max": {"symbol_error": 0, "link_downed": 0},
     "max_rate": {"port_rcv_errors": 0.5}, "interval": 2.0, "source": "sysfs"},
    # AWS EFA keeps its admin-command and verb failures for the whole device (efa_0/hw_counters), receive drops
    # per port: one spec limits both, each read where the driver keeps it.
    {"device": "efa_0", "max": {"cmds_err": 0, "create_qp_err": 0, "rx_drops": 0}, "max_rate": {"cmds_err": 0}},
    # RoCE lossless health on mlx5: nothing dropped for lack of buffer (PFC holds), no pause storm, a clean
    # link; and no drop while the check watches.
    {"source": "ethtool", "interface": "ens1f0np0",
     "max": {"rx_discards_phy": 0, "tx_pause_storm_error_events": 0, "tx_pause_storm_warning_events": 0,
             "rx_crc_errors_phy": 0, "rx_symbol_err_phy": 0, "link_down_events_phy": 0},
     "max_rate": {"rx_discards_phy": 0}, "interval": 2.0},
))
