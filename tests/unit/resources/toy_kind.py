"""A resource kind defined outside the package, as a plugin would: everything it has is in this module.

`hugepages` asks for a number of huge pages (`/proc/sys/vm/nr_hugepages`). Nothing here is registered
on import; the test registers `RESOURCE` itself and takes it away again.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from provisioner.load.specs import Int, Spec
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    compare,
    errors_for,
    read_value_command,
    sh,
    stdout_of,
)
from provisioner.resources.steps import PHASE_SYSCTL, Step, command_step

KIND = "hugepages"
PATH = "/proc/sys/vm/nr_hugepages"


class HugepagesSpec(Spec):
    """The number of 2 MiB huge pages the kernel keeps."""

    kind: ClassVar[str] = KIND

    count: Int = Field(ge=0, description="number of huge pages")
    template: str | None = Field(None, description="a template whose rendering is kept as `note`")
    note: str = Field("", description="free text")
    templates: ClassVar[dict[str, str]] = {"template": "note"}

    def target(self) -> str:
        return f"{KIND}[{self.count}]"


PROBE = Probe(read_value_command(sh(PATH)))


def probes(spec: HugepagesSpec, ctx: HostContext) -> list[Probe]:
    return [PROBE]


def evaluate(spec: HugepagesSpec, results: Results, ctx: HostContext) -> list[Check]:
    try:
        text = stdout_of(results, PROBE, PATH)
    except ProbeFailed as exc:
        return errors_for([("count", spec.count)], str(exc))
    return [compare("count", spec.count, int(text.strip()))]


def remedy(spec: HugepagesSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    return [command_step(spec.target(), "set", ["sysctl", "-w", f"vm.nr_hugepages={spec.count}"],
                         phase=PHASE_SYSCTL)]


RESOURCE = ResourceType(KIND, HugepagesSpec, probes, evaluate, remedy=remedy, needs=("kernel_module",),
                        examples=({"count": 512, "template": "note.j2"}, {"count": 0, "note": "none here"}))
