"""Which programs a host's PATH finds (pure): the pre-flight's probe for them and its parsing.

nccl-tests needs all_reduce_perf on every rank's host and its launcher (srun or mpirun) where that runs;
srun's MPI plugins are read with it, so `--mpi=pmix` is only asked of a Slurm that has it.
"""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.resources.base import Probe, sh


def tools_probe(tools: Sequence[str]) -> Probe:
    """One line per program: its name, a tab, where the login shell's PATH finds it (`-`: nowhere). With
    srun among them, its MPI plugins follow a `mpi:` line (--mpi=pmix is added only where Slurm has it)."""
    lines = [f"printf '%s\\t%s\\n' {sh(tool)} \"$(command -v {sh(tool)} 2>/dev/null || echo -)\""
             for tool in tools]
    if "srun" in tools:
        lines.append("echo mpi:; command -v srun >/dev/null 2>&1 && srun --mpi=list 2>&1; true")
    return Probe("\n".join(lines) or "true", timeout=30)


def parse_tools(text: str) -> tuple[dict[str, str | None], tuple[str, ...]]:
    head, _, mpi = text.partition("mpi:\n")
    found: dict[str, str | None] = {}
    for line in head.splitlines():
        tool, tab, where = line.partition("\t")
        if tab:
            found[tool] = None if where.strip() in ("-", "") else where.strip()
    # `srun --mpi=list`: a title line, then one plugin per line (some releases prefix `srun: `).
    plugins = tuple(word for line in mpi.splitlines()
                    if (word := line.strip().removeprefix("srun:").strip()) and " " not in word)
    return found, plugins
