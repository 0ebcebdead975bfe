"""What one smoke run is asked to do: sizes, iterations, backend, runner, threshold, deadline.

The same settings come from the command line and from a play's `verify: all_reduce:` mapping
(`AllReduceSpec`, validated like every other playbook key); the command line wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from provisioner.load import cmdtemplate
from provisioner.smoke.verdicts import SLOW_FRACTION

Backend = Literal["auto", "nccl", "gloo"]
Runner = Literal["torch", "nccl-tests"]
# How nccl-tests' ranks are started; auto: srun where there is Slurm, else mpirun (see nccltests.py).
Launcher = Literal["auto", "srun", "mpirun"]

_SIZE = re.compile(r"^\s*(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_SIZES = 64
DEFAULT_SIZES = "1M:64M"
# The rendezvous port on the first host; nodes need it free and reachable over the data network.
DEFAULT_PORT = 29500
# Open MPI hands the ranks it starts on other hosts only the variables named by `-x`: {forward} is one
# `-x NAME` per variable the runner exports (nccltests.command), never a fixed list, which would leave the rest
# of the playbook's NCCL environment behind and name unset ones (Open MPI 5 prints a warning for each).
LAUNCH_FIELDS = ("np", "ppn", "nodes", "hosts", "hostlist", "binary", "min_bytes", "max_bytes", "iters", "forward")
LAUNCH_LISTS = ("forward",)  # fields that stand for whole words, any number of them
DEFAULT_LAUNCH = ("mpirun --allow-run-as-root -np {np} -H {hosts} {forward} {binary} -b {min_bytes} "
                  "-e {max_bytes} -f 2 -g 1 -n {iters}")
# srun takes Slurm node names (the inventory's host names) and ends the step when one task fails, so a
# rank that could not start does not leave the others waiting for it until the deadline.
SRUN_LAUNCH = ("srun -N {nodes} --ntasks-per-node={ppn} -w {hostlist} --kill-on-bad-exit=1 {binary} "
               "-b {min_bytes} -e {max_bytes} -f 2 -g 1 -n {iters}")


def parse_size(text: str) -> int:
    """'64M' -> 67108864 (K/M/G/T are powers of 1024, as in nccl-tests' -b/-e)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 4096, 512K, 64M, 1G)")
    value = int(float(match["number"]) * _UNITS[match["unit"].upper()])
    if value < 4:
        raise ValueError(f"size {text!r} is below one float32 element (4 bytes)")
    return value


def parse_sizes(text: str) -> tuple[int, ...]:
    """'1M:1G' (doubling, as nccl-tests -f 2), 'MIN:MAX:FACTOR', or a list '1M,8M,64M'."""
    text = str(text).strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"sizes {text!r}: write MIN:MAX or MIN:MAX:FACTOR, e.g. 1M:1G")
        low, high = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) == 3 else 2
        if high < low:
            raise ValueError(f"sizes {text!r}: the maximum is below the minimum")
        if factor < 2:
            raise ValueError(f"sizes {text!r}: the factor must be 2 or more")
        sizes = [low]
        while sizes[-1] * factor <= high and len(sizes) <= MAX_SIZES:
            sizes.append(sizes[-1] * factor)
    else:
        sizes = sorted({parse_size(part) for part in text.split(",") if part.strip()})
    if not sizes:
        raise ValueError("no message sizes given")
    if len(sizes) > MAX_SIZES:
        raise ValueError(f"sizes {text!r}: more than {MAX_SIZES} sizes")
    return tuple(sizes)


def check_launch(template: str) -> None:
    """ValueError for a launch template that cannot be split, names an unknown field or splits {forward}."""
    cmdtemplate.words(template, LAUNCH_FIELDS, "launch template", LAUNCH_LISTS)


class AllReduceSpec(BaseModel):
    """A play's `verify: all_reduce:` settings (every key optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_busbw: float | None = Field(None, ge=0, description="pass threshold: average bus bandwidth in GB/s")
    sizes: str | None = Field(None, description="message sizes, e.g. 1M:1G or 1M,8M,64M")
    iters: int | None = Field(None, ge=1, le=10000, description="timed iterations per size")
    runner: Runner | None = Field(None, description="torch or nccl-tests")
    backend: Backend | None = Field(None, description="auto, nccl or gloo")
    timeout: float | None = Field(None, gt=0, le=86400, description="seconds for the rendezvous and the sweep")
    launch: str | None = Field(None, description="nccl-tests launch template (overrides launcher)")
    launcher: Launcher | None = Field(None, description="how nccl-tests starts its ranks: auto, srun or mpirun")
    slow_fraction: float | None = Field(None, ge=0, lt=1, description="a host below this x the fleet median is slow")
    link_fraction: float | None = Field(None, ge=0, le=1, description="the fleet below this x its link rate is slow")

    @field_validator("launch")
    @classmethod
    def _check_launch(cls, value: str | None) -> str | None:
        if value is not None:
            check_launch(value)
        return value

    @field_validator("sizes", mode="before")
    @classmethod
    def _check_sizes(cls, value: Any) -> Any:
        if value is not None:
            parse_sizes(str(value))
            return str(value)
        return value


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...] = field(default_factory=lambda: parse_sizes(DEFAULT_SIZES))
    iters: int = 5
    warmup: int = 1
    backend: Backend = "auto"
    runner: Runner = "torch"
    min_busbw: float | None = None
    timeout: float = 120.0
    port: int = DEFAULT_PORT
    launch: str | None = None  # a template of one's own; None: the launcher's (DEFAULT_LAUNCH, SRUN_LAUNCH)
    launcher: Launcher = "auto"
    binary: str = "all_reduce_perf"
    localise: bool = True
    slow_fraction: float = SLOW_FRACTION  # 0 turns the per-host comparison (and its pairs) off
    # None: LINK_FRACTION for NCCL, not compared for gloo (CPU-bound); 0 turns the comparison off.
    link_fraction: float | None = None

    def merged(self, spec: AllReduceSpec | None, explicit: dict[str, Any]) -> Settings:
        """Playbook values over the defaults, then the options given on the command line over both."""
        values: dict[str, Any] = {}
        if spec is not None:
            for key, value in spec.model_dump(exclude_none=True).items():
                values[key] = parse_sizes(value) if key == "sizes" else value
        values.update({k: v for k, v in explicit.items() if v is not None})
        return replace(self, **values)
