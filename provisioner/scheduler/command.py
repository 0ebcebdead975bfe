"""`--drain-cmd TEMPLATE`: a scheduler of its own whose drain runs a local command per host (for a
scheduler other than Slurm, or a controller fabnet does not reach over SSH).

The template is split into words like a shell would (shlex) BEFORE the values are put in, and run
without a shell: a host name or a reason can never become part of a command, whatever it contains.
Fields: `{host}`, the inventory's name; `{node}`, the scheduler's (`fabnet_slurm_node`, else the
inventory's); `{reason}`, the cause fabnet gives (its reason without the `fabnet: COMMAND:` in front);
`{busbw}`, the host's bus bandwidth in GB/s where smoke measured one, else empty.
"""

from __future__ import annotations

import shlex
import string
import subprocess
from collections.abc import Mapping, Sequence

from provisioner.load import cmdtemplate
from provisioner.scheduler import REASON_PREFIX, NodeState, NoStates, Ran, SchedulerError
from provisioner.scheduler.hostlist import expand as expand_hostlist

FIELDS = ("host", "node", "reason", "busbw")
TIMEOUT = 60.0
MAX_OUTPUT = 500


def check_template(template: str) -> None:
    """Raise ValueError for a template that cannot be split or names an unknown field."""
    cmdtemplate.words(template, FIELDS, "drain command")


def uses(template: str, field: str) -> bool:
    """Whether the (checked) template puts `{field}` anywhere."""
    return any(name == field for word in cmdtemplate.words(template, FIELDS, "drain command")
               for _text, name, _spec, _conv in string.Formatter().parse(word))


def render(template: str, values: Mapping[str, str]) -> list[str]:
    """The argument list for one host. Any field may appear inside any word."""
    return cmdtemplate.fill(template, FIELDS, "drain command", values)


def cause(reason: str) -> str:
    """'fabnet: smoke: gpu03 slow' -> 'gpu03 slow': what the template's {reason} stands for."""
    if not reason.startswith(REASON_PREFIX):
        return reason
    _source, colon, rest = reason[len(REASON_PREFIX):].partition(":")
    return rest.strip() if colon else reason


def run(argv: list[str], timeout: float = TIMEOUT) -> Ran:
    command = shlex.join(argv)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return Ran(command, None, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return Ran(command, None, "", f"did not finish in {timeout:g} s")
    except OSError as exc:  # not executable, a directory
        return Ran(command, None, "", f"{argv[0]}: {exc.strerror or exc}")
    output = (proc.stdout + proc.stderr).strip()[-MAX_OUTPUT:]
    return Ran(command, proc.returncode, output,
               None if proc.returncode == 0 else f"exit {proc.returncode}" + (f": {output}" if output else ""))


class Command:
    """Drains by running the template once per host, one after another; it cannot read node states or
    resume, so `--resume-fixed` and `--slurm-job` stay Slurm's."""

    name = "command"

    def __init__(self, template: str, fields: Mapping[str, Mapping[str, str]] | None = None,
                 timeout: float = TIMEOUT, nodes: Mapping[str, str] | None = None) -> None:
        check_template(template)
        self.template = template
        self.fields = fields or {}  # host -> extra fields ({busbw})
        self.timeout = timeout
        self.nodes = nodes or {}  # host -> its scheduler node name, where the two differ

    def drain(self, reasons: Mapping[str, str]) -> dict[str, str | Ran | None]:
        return {host: run(render(self.template, {**self.fields.get(host, {}), "host": host,
                                                 "node": self.nodes.get(host, host), "reason": cause(why)}),
                          self.timeout)
                for host, why in reasons.items()}

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        raise SchedulerError("a drain command cannot resume hosts (--resume-fixed needs Slurm)")

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        raise NoStates("a drain command cannot read node states (--resume-fixed needs Slurm)")

    def nodes_of_job(self, jobid: str) -> list[str]:
        raise SchedulerError("a drain command cannot find a job's nodes (--slurm-job needs Slurm)")

    def expand(self, hostlist: str) -> list[str]:
        return expand_hostlist(hostlist)
