"""Runner `nccl-tests`: `all_reduce_perf` through a launch template (mpirun or srun), run on the first
host, its output read with the same parser as `fabnet parse nccl_tests`.

The template is split into words before values go in (as for --drain-cmd), and each word is quoted
for the remote shell, so host names and paths from the inventory cannot inject commands.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping, Sequence

from provisioner.errors import ParseError
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.resources.base import sh
from provisioner.smoke.busbw import SizeResult, all_reduce_factor

FIELDS = ("np", "ppn", "nodes", "hosts", "hostlist", "binary", "min_bytes", "max_bytes", "iters")


def command(template: str, *, hosts: Sequence[str], ranks_per_host: int, binary: str, sizes: Sequence[int],
            iters: int, env: Mapping[str, str]) -> str:
    """The remote command line: `env K=V ... <template rendered>`, every word quoted."""
    values = {
        "np": str(len(hosts) * ranks_per_host), "ppn": str(ranks_per_host), "nodes": str(len(hosts)),
        "hosts": ",".join(f"{h}:{ranks_per_host}" for h in hosts), "hostlist": ",".join(hosts),
        "binary": binary, "min_bytes": str(min(sizes)), "max_bytes": str(max(sizes)), "iters": str(iters),
    }
    words = shlex.split(template)
    if not words:
        raise ValueError("the nccl-tests launch template is empty")
    for word in words:
        for _text, name, _spec, _conv in string.Formatter().parse(word):
            if name is not None and name not in FIELDS:
                raise ValueError(f"unknown field {{{name}}} in the launch template; allowed: "
                                 + ", ".join("{" + f + "}" for f in FIELDS))
    rendered = [word.format_map(values) for word in words]
    prefix = ["env", *(f"{k}={v}" for k, v in sorted(env.items()))] if env else []
    return " ".join(sh(word) for word in [*prefix, *rendered])


def rows(text: str, ranks: int) -> tuple[list[SizeResult], float | None, str | None]:
    """Per-size figures (out-of-place, as nccl-tests' own summary uses), its `Avg bus bandwidth`, and
    what is wrong with the output when the parser found it incomplete (a run cut off, NCCL failures).

    Raises ParseError for output the parser cannot read. busbw is taken as printed; when a row lacks
    it, it is derived from algbw with the same all-reduce factor.
    """
    parsed = parse_nccl_tests(text)
    if not parsed.rows and parsed.unplaced:
        # A header and nothing readable under it: the run printed something, but no figures to judge.
        first = parsed.unplaced[0]
        raise ParseError("nccl_tests", f"no result rows: {first.reason}", line=first.line, text=first.text)
    problem = None
    failures = [str(failure) for failure in parsed.failures]
    if not parsed.complete or failures:
        missing = ", ".join(parsed.missing)
        verdict = str(parsed.verdict or "incomplete")
        problem = "; ".join(p for p in (verdict, f"missing: {missing}" if missing else "", *failures[:3]) if p)
    found = []
    for row in parsed.rows:
        time_us = row.oop_time_us if row.oop_time_us is not None else row.ip_time_us
        alg = row.oop_algbw if row.oop_algbw is not None else row.ip_algbw
        bus = row.oop_busbw if row.oop_busbw is not None else row.ip_busbw
        if time_us is None or alg is None:
            continue
        if bus is None:
            bus = alg * all_reduce_factor(ranks)
        wrong = row.oop_wrong if isinstance(row.oop_wrong, int) else 0
        found.append(SizeResult(row.size, time_us, alg, bus, wrong))
    return found, parsed.avg_busbw, problem
