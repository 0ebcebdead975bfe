"""Lines the shell printed in a pasted terminal session, not the tool: an echoed command behind a prompt,
and a tool's own command line with or without one. Every parser skips them the same way (`is_shell`).
"""

from __future__ import annotations

import re
from functools import lru_cache

from provisioner.parsers import COMMANDS  # the registry: loaded before its modules, importing none of them
from provisioner.parsers._text import PROMPT, PROMPT_SIGN, Line

# A tool's own command line, as a terminal shows it: behind any prompt above, a bare `$ ` or root's `# `, a
# `set -x` trace's `+ `, or none; with sudo, env or variables (`NCCL_DEBUG=INFO`), behind a launcher (`mpirun
# -np 8 -x NCCL_DEBUG=INFO ./all_reduce_perf`, `srun -N2 ibstat`), by its path, with its arguments. Naming the
# command is what tells root's `# show_gids` from a tool's own `# comment`, and a launcher's command line from
# its own messages (`mpirun noticed that process rank 3 ...` names no program).
_ASSIGN = r"(?:[A-Za-z_]\w*=\S*\s+)*"
_LAUNCHER = r"(?:(?:\S*/)?(?:mpirun|mpiexec|orterun|srun|jsrun|prun)\s(?:[^|;&]*?\s)?)?"
_COMMAND = (rf"^\s*(?:(?:{{sign}}|[$#]|\++)\s*)?{_ASSIGN}(?:sudo(?:\s+-\S+)*\s+)?(?:env\s+)?{_ASSIGN}"
            rf"{_LAUNCHER}(?:\S*/)?(?:{{names}})(?:\s|[|;&]|$)")


def is_prompt(line: Line) -> bool:
    """True for an echoed shell command line such as `$ ibstat | grep mlx5`."""
    return bool(PROMPT.match(line.text))


def is_command(line: Line, *names: str) -> bool:
    """True for a pasted command line that runs one of `names` (`show_gids mlx5_0`, `# show_gids`,
    `$ sudo /usr/sbin/show_gids | grep v2`): the command, not its output, with or without its prompt."""
    return bool(names) and bool(_command(names).match(line.text))


def is_shell(line: Line, kind: str) -> bool:
    """True for a line the shell printed, not the tool: any prompt line, or a command line that runs one of
    `kind`'s own commands (the registry's COMMANDS) with or without a prompt. Every parser skips these the
    same way; another tool's command line without a prompt is left to the parser to report."""
    return is_prompt(line) or is_command(line, *COMMANDS[kind])


@lru_cache(maxsize=64)
def _command(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(_COMMAND.format(sign=PROMPT_SIGN, names="|".join(re.escape(name) for name in names)),
                      re.ASCII)
