"""What the commands share: click settings, and the sudo password for `ansible_become` of those that run on hosts."""

from __future__ import annotations

import getpass
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from provisioner.run.become import ENV_VAR, Secret

if TYPE_CHECKING:
    from provisioner.load.hostplans import HostPlan

F = TypeVar("F", bound=Callable[..., object])

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

playbook_option = click.option(
    "-p", "--playbook", type=click.Path(path_type=Path), default=None,
    help="Playbook: the desired state, as YAML plays. Default: playbooks/site.yml in the working directory, "
         "else beside the inventory or in a folder above it.",
)
limit_option = click.option(
    "-l", "--limit", default=None,
    help="Only these hosts: Ansible host patterns, e.g. 'gpu01,gpu02', 'gpu:!gpu05', 'rack1:&gpu', 'gpu0*', "
         "'gpu[0:3]', '~gpu0[1-4]', @FILE (a file of host names).",
)
connect_timeout_option = click.option(
    "--connect-timeout", type=click.FloatRange(0.5, 300), default=10.0, show_default=True,
    help="Seconds to wait for a host's SSH login.",
)


def forks_option(what: str, default: int = 50) -> Callable[[F], F]:
    """--forks: how many hosts at once; `what` is the help ("Hosts audited in parallel.")."""
    return click.option("-f", "--forks", type=click.IntRange(1, 1000), default=default, show_default=True, help=what)


def timeout_option(default: float, maximum: float, what: str) -> Callable[[F], F]:
    """--timeout: seconds for one host's exec once logged in."""
    return click.option("--timeout", "command_timeout", type=click.FloatRange(1, maximum), default=default,
                        show_default=True, help=what)


ssh_config_option = click.option(
    "--ssh-config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="OpenSSH client config to use instead of ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump).",
)

BECOME_HELP = (
    "Ask for the sudo password of hosts with ansible_become, once, on the terminal. Without a terminal, "
    f"set {ENV_VAR} instead. Without either, sudo must not need one (NOPASSWD)."
)


def become_option(function: F) -> F:
    return click.option("-K", "--ask-become-pass", "ask_become_pass", is_flag=True, help=BECOME_HELP)(function)


def _terminal() -> bool:
    """Whether there is a terminal to ask on (getpass reads /dev/tty, never standard input)."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


def become_password(ask: bool) -> Secret | None:
    """The sudo password: asked with -K, else from FABNET_BECOME_PASSWORD, else none.

    The variable is taken out of this process's environment once read, so no program fabnet starts
    (a drain command, an inventory script) inherits it.
    """
    value = os.environ.pop(ENV_VAR, "") or None
    if ask:
        if not _terminal():
            raise click.UsageError(f"-K needs a terminal to ask for the sudo password on; set {ENV_VAR} instead")
        value = getpass.getpass("BECOME password: ")
    if value is None:
        return None
    try:
        return Secret(value)
    except ValueError as exc:
        source = "the password typed at -K" if ask else ENV_VAR
        raise click.UsageError(f"{source}: {exc}") from None


SCHEDULER_HELP = {
    "nodelist": "Only these hosts, as a Slurm hostlist (e.g. 'gpu[01-04,07]') of Slurm node names "
                "(fabnet_slurm_node, else the inventory's); with --limit, the hosts in both. A name no host has "
                "is an error.",
    "slurm_job": "Only the hosts Slurm job JOBID runs on (asked of the inventory's fabnet_slurm_controller); "
                 "with --limit or --nodelist, the hosts in all of them.",
    "drain_failed": "Drain in Slurm each host that failed (or stays drifted, or was slow), with the reason "
                    "'fabnet: COMMAND: CAUSE'.",
    "resume_fixed": "Resume in Slurm each host fabnet drained (by this kind of check) that passes now; a node "
                    "drained by anyone else, or for another reason, is left drained.",
    "drain_cmd": "Drain each host --drain-failed would, by running TEMPLATE locally instead of asking Slurm, e.g. "
                 "'scontrol update nodename={node} state=drain reason=\"fabnet: {reason}\"' (fields {host}, "
                 "{node} (its Slurm name: fabnet_slurm_node, else {host}), {reason}, and {busbw} in smoke; split "
                 "into words first, no shell involved).",
}


def checked_template(check: str) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A click callback refusing, as a usage error, a command template that `check` ("module:function",
    imported only when the option is given: the CLI starts without it) raises ValueError for."""
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            module, _, name = check.partition(":")
            try:
                getattr(importlib.import_module(module), name)(value)
            except ValueError as exc:
                raise click.BadParameter(str(exc)) from exc
        return value
    return callback


_drain_cmd = checked_template("provisioner.scheduler.command:check_template")


def scheduler_options(function: F) -> F:
    """--nodelist, --slurm-job, --drain-failed, --drain-cmd, --resume-fixed, handed to the command as one
    `scheduler` argument (a scheduler.select.SchedulerArgs). --drain-cmd chooses the backend that drains,
    so it goes with neither --drain-failed (Slurm's) nor --resume-fixed (which needs Slurm's node states)."""
    import functools

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        from provisioner.scheduler.select import SchedulerArgs

        drain_cmd = kwargs.pop("drain_cmd")
        drain_failed, resume_fixed = bool(kwargs.pop("drain_failed")), bool(kwargs.pop("resume_fixed"))
        if drain_cmd is not None and (drain_failed or resume_fixed):
            other = "--drain-failed" if drain_failed else "--resume-fixed"
            raise click.UsageError(f"--drain-cmd drains by a local command instead of Slurm: it cannot go with "
                                   f"{other}, which asks Slurm")
        kwargs["scheduler"] = SchedulerArgs(
            nodelist=kwargs.pop("nodelist"), slurm_job=kwargs.pop("slurm_job"),  # type: ignore[arg-type]
            drain_failed=drain_failed, resume_fixed=resume_fixed, drain_cmd=drain_cmd)  # type: ignore[arg-type]
        return function(*args, **kwargs)

    decorated = click.option("--resume-fixed", is_flag=True, help=SCHEDULER_HELP["resume_fixed"])(wrapper)
    decorated = click.option("--drain-cmd", metavar="TEMPLATE", callback=_drain_cmd, default=None,
                             help=SCHEDULER_HELP["drain_cmd"])(decorated)
    decorated = click.option("--drain-failed", is_flag=True, help=SCHEDULER_HELP["drain_failed"])(decorated)
    decorated = click.option("--slurm-job", metavar="JOBID", default=None, help=SCHEDULER_HELP["slurm_job"])(decorated)
    decorated = click.option("--nodelist", metavar="HOSTLIST", default=None, help=SCHEDULER_HELP["nodelist"])(decorated)
    return decorated  # type: ignore[return-value]


def load_targets(inventory: Path, playbook: Path | None, limit: str | None,
                 ssh_config: Path | None = None) -> tuple[list[HostPlan], Path]:
    """What every command that runs a playbook on hosts starts with: the playbook (found as
    load.loading.find_playbook finds it), the host plans it targets after --limit, the inventory's
    warnings shown, and an error when no host is left."""
    from provisioner.errors import ConfigError
    from provisioner.load.loading import find_playbook, load_plans
    from provisioner.output import report

    found = find_playbook(inventory, playbook)
    plans, warnings = load_plans(inventory, found, limit, ssh_config=ssh_config)
    for warning in warnings:
        report.warn(warning)
    if not plans:
        raise ConfigError("no host of the inventory is targeted by the playbook's plays (check hosts: and --limit)",
                          file=str(found))
    return plans, found
