"""The all-reduce jobs a smoke run starts after pre-flight: the fleet's job, pairs of hosts side by
side (localisation), and the confirmation of a host the fleet comparison calls slow.

A run's hosts, facts and settings are fixed for all of them, so they live in one `Runs`; each pair
run it makes is recorded in `records` (the report's pairs table, in the order they ran).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.run import runner
from provisioner.smoke import localise, plan, preflight, verdicts
from provisioner.smoke.busbw import average_busbw
from provisioner.smoke.diagnose import JobResult
from provisioner.smoke.launcher import SessionOf, run_job
from provisioner.smoke.settings import Settings
from provisioner.smoke.targets import Target

Log = Callable[[str], None]
Pair = localise.Pair

# Each kind of run gets its own rendezvous port above the fleet's, so a late rank of one never joins
# the next.
LOCALISE_PORTS = (1, 2)
CONFIRM_PORT = 3
CONFIRM_ROUND = 3


@dataclass
class Runs:
    targets: Sequence[Target]
    facts: dict[str, preflight.HostFacts]
    settings: Settings
    backend: str
    ranks_per_host: int
    session_of: SessionOf
    records: list[dict[str, Any]] = field(default_factory=list)

    def job(self, targets: Sequence[Target], port: int, pairs: bool = False) -> plan.Job:
        settings = self.settings
        master = preflight.data_address(targets[0], self.facts.get(targets[0].name)) or targets[0].host.address
        ranks = self.ranks_per_host
        # After the sweep, the first rank of every host measures pairs of hosts in the same process group.
        rounds = tuple(tuple((a * ranks, b * ranks) for a, b in r)
                       for r in verdicts.pair_rounds(len(targets))) if pairs else ()
        # Each rank gives up a little before fabnet's deadline, so its own error (with the ranks it
        # waited for) reaches the report; the launcher's kill is the backstop.
        return plan.Job(run_id=secrets.token_hex(6), hosts=tuple(targets), master=master, port=port,
                        backend=self.backend, ranks_per_host=ranks, sizes=settings.sizes, iters=settings.iters,
                        warmup=settings.warmup, timeout=max(3.0, settings.timeout * 0.7),
                        deadline=max(4.0, settings.timeout * 0.85), pairs=rounds,
                        pair_bytes=verdicts.pair_bytes(settings.sizes) if rounds else 0)

    def fleet(self) -> JobResult:
        job = self.job(self.targets, self.settings.port, pairs=self.settings.slow_fraction > 0)
        return run_job(job, self.session_of, self.settings.timeout)

    def pair_round(self, pairs: Sequence[Pair], port: int, round_no: int,
                   role: str = "pair") -> dict[Pair, float | None]:
        """Every pair at once: they are measured side by side, as the fleet run loads the fabric."""
        by_name = {t.name: t for t in self.targets}

        def one(pair: Pair) -> tuple[Pair, JobResult]:
            job = self.job([by_name[pair[0]], by_name[pair[1]]], port)
            return pair, run_job(job, self.session_of, self.settings.timeout)

        results: dict[Pair, float | None] = {}
        if pairs:
            for pair, result in runner.each(pairs, one, forks=len(pairs)):
                value = average_busbw(result.rows) if result.ok else None
                results[pair] = value
                self.records.append({"round": round_no, "hosts": list(pair), "busbw": value, "ok": result.ok,
                                     "cause": result.cause, "role": role})
        return results

    def localise(self, threshold: float, log: Log) -> localise.Verdict:
        pairs, leftover = localise.first_round([t.name for t in self.targets])
        log(f"localising: {len(pairs)} pairs in parallel")
        port = self.settings.port
        round1 = self.pair_round(pairs, port + LOCALISE_PORTS[0], 1)
        slow, fast = localise.slow_pairs(round1, threshold)
        round2_pairs = localise.second_round(slow, leftover, fast) if fast else []
        round2: dict[Pair, float | None] = {}
        if round2_pairs:
            log(f"localising: {len(round2_pairs)} suspects, each with a good host")
            round2 = self.pair_round(round2_pairs, port + LOCALISE_PORTS[1], 2)
        return localise.verdict(round1, round2, threshold, leftover)

    def confirm(self, judgement: verdicts.Judgement, pairs: dict[tuple[str, str], float],
                log: Log) -> verdicts.Confirmation:
        """Each host the side-by-side pairs call slow, measured again alone with the fastest host, then
        two good hosts alone right after it (the control): the suspect's best figure goes into `pairs`,
        and the control's into the result, by suspect. A busy machine or fabric slows the control as
        much as the suspect; a slow host stays slow beside it. When the suspect is still below the
        control it gets one more try, since load that came and went between the two runs is no fault
        of the host. A run alone that failed outright is tried once more (a fault that came and went);
        failed twice, the suspect stays slow and the result says why."""
        found = verdicts.Confirmation()
        control = verdicts.control_pair(judgement)
        port = self.settings.port + CONFIRM_PORT
        for pair in verdicts.confirmation_pairs(judgement):  # one at a time: alone on the fabric
            log(f"measuring {pair[0]} again, alone with {pair[1]}")
            figure = self._alone(pair, port, "suspect")
            if figure is None:
                log(f"that run failed; measuring {pair[0]} once more, alone with {pair[1]}")
                figure = self._alone(pair, port, "suspect")
            if figure is None:
                cause = next((r.get("cause") for r in reversed(self.records)), None) or "no cause given"
                found.failed[pair[0]] = f"with {pair[1]}: the run failed twice ({cause})"
                continue
            if control is not None:
                log(f"measuring {control[0]} with {control[1]}, alone, to compare")
                # A control run that failed says nothing about the moment: the suspect is judged without one.
                if (reference := self._alone(control, port, "control")) is not None:
                    if figure < self.settings.slow_fraction * reference:
                        log(f"measuring {pair[0]} once more, alone with {pair[1]}")
                        figure = max(figure, self._alone(pair, port, "suspect") or 0.0)
                    found.controls[pair[0]] = reference
            pairs[pair] = max(figure, pairs.get(pair, 0.0))
        return found

    def _alone(self, pair: Pair, port: int, role: str) -> float | None:
        """The pair's figure measured on its own; None when the run failed."""
        return self.pair_round([pair], port, CONFIRM_ROUND, role).get(pair)

