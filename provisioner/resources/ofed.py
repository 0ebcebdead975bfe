"""`ofed`: the installed MLNX_OFED / DOCA driver stack, as `ofed_info -s` reports it.

`ofed_info` missing (exit 127) means no OFED is installed: that is drift, not an error.
"""

from __future__ import annotations

import shlex

from provisioner.errors import ParseError
from provisioner.load.specs import OfedSpec
from provisioner.parsers._text import require_complete
from provisioner.parsers.ofed_info import parse_ofed_info
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    compare,
    drift,
    errors_for,
    ok,
    sh,
    stdout_of,
)
from provisioner.resources.steps import PHASE_PACKAGES, Step, impossible

KIND = "ofed"

OFED_INFO = Probe(sh("ofed_info", "-s"))


def probes(spec: OfedSpec, ctx: HostContext) -> list[Probe]:
    return [OFED_INFO]


def evaluate(spec: OfedSpec, results: Results, ctx: HostContext) -> list[Check]:
    attributes: list[tuple[str, object]] = [("version", spec.version)]
    if spec.flavor is not None:
        attributes.append(("flavor", spec.flavor))
    result = results.get(OFED_INFO)
    if result is not None and result.exit_code == 127:
        return [drift(attribute, desired, "not installed", "OFED not installed") for attribute, desired in attributes]
    try:
        info = require_complete(parse_ofed_info(stdout_of(results, OFED_INFO, "ofed_info -s")), "ofed_info")
    except (ProbeFailed, ParseError) as exc:
        return errors_for(attributes, str(exc))
    installed = info.driver_version
    if installed is None:
        checks = errors_for([("version", spec.version)],
                            f"{info.package} names the DOCA release only, not its driver release")
    else:
        verdict = ok if spec.version.matches(installed) else drift
        checks = [verdict("version", spec.version, installed, "" if verdict is ok else f"installed: {info.package}")]
    if spec.flavor is not None:
        checks.append(compare("flavor", spec.flavor, info.flavor))
    return checks


# ---------------------------------------------------------------------------------------------- remedy

INSTALL_VARIABLE = "fabnet_ofed_install_command"


def remedy(spec: OfedSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """The site's own installer (OFED is installed many ways): the inventory variable
    `fabnet_ofed_install_command`, run with FABNET_OFED_VERSION set to the wanted constraint. The
    re-check after the run says whether it worked."""
    if not any(c.status == "drift" for c in checks):
        return []
    target = spec.target()
    if not ctx.ofed_install_command:
        return [impossible(target, "install", f"set {INSTALL_VARIABLE} in the inventory to say how this site "
                                              "installs OFED", PHASE_PACKAGES)]
    # The command is the operator's own shell text, as trusted as the inventory it comes from; only the
    # version reaches it, through the environment and quoted. It is evaluated in a subshell of the change
    # script, never handed to `sh -c`: a command line is readable by every user of the node, and an
    # installer often carries a repository token. Without `-e` and arguments, as `sh -c` would run it.
    command = (f"FABNET_OFED_VERSION={shlex.quote(spec.version.text)}; export FABNET_OFED_VERSION; "
               f"( set +e; set --; eval {shlex.quote(ctx.ofed_install_command)} )")
    return [Step(target, "install", command, f"{INSTALL_VARIABLE} (FABNET_OFED_VERSION={spec.version.text})",
                 phase=PHASE_PACKAGES)]


RESOURCE = ResourceType(KIND, OfedSpec, probes, evaluate, remedy=remedy,
                        examples=({"version": ">=23.10", "flavor": "MLNX_OFED_LINUX"},))
