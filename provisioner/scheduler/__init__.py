"""The batch scheduler behind one small interface: drain and resume nodes, read their state, find a job's
nodes, expand a hostlist. Two implementations: Slurm (slurm.py, over SSH to the controller) and a local
drain command (command.py, `--drain-cmd`, which only drains). The commands reach them through select.py
(which hosts a command works on) and drain.py (what it tells the scheduler afterwards; the only place
that drains).

Commands name hosts as the inventory does; names.py turns those names into the scheduler's node names
(`fabnet_slurm_node`) and back, so a backend is asked about exactly the names it knows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from provisioner.errors import FabnetError

# Every reason fabnet sets starts with this; a node drained with any other reason is someone else's.
REASON_PREFIX = "fabnet:"

# The words `sinfo --format %T` prints (Slurm's node_state_string(), lower-cased by sinfo), in every release
# from 20.11 to 25.11. Each word hides the others: a drained node that also stops responding still reads
# `drained*`, one being rebooted reads `reboot` or `reboot^` and one whose registration was refused reads
# `inval`, drained or not, so the DRAIN flag is read apart (NodeState.drain). `drain` and `drng` are the
# short forms of `%t`, never printed for `%T`.
DRAINED = frozenset({"drained", "draining"})
# The words of a node Slurm runs jobs on or keeps ready for them: its base state is idle, allocated or
# mixed (`completing` is an idle one whose last job is ending; `reserved`, `planned` and `blocked` are
# idle ones that the scheduler holds for a job; `perfctrs`, before 24.05, one whose network counters a job
# holds; `maint`, one in a maintenance reservation). Every other word is out of service: down, failed or
# failing, refused at registration (`inval`), being rebooted, not yet part of the cluster (`future`,
# `unknown`, and the power, cloud, external and dynamic words Slurm prints for a node with no base
# state), or a word this list does not know, such as a later release's: fabnet keeps its reason.
IN_SERVICE = frozenset({"idle", "mixed", "allocated", "completing", "reserved", "planned", "blocked",
                        "perfctrs", "maint"})
# A node whose reboot was asked for (`@`) or is under way (`^`, or the word `reboot` of an idle or down
# node): Slurm's resume clears the reboot request along with the drain (node_mgr.c, update_node()).
REBOOTING_STATES = frozenset({"reboot", "reboot_issued"})
REBOOTING_FLAGS = frozenset({"@", "^"})


class SchedulerError(FabnetError):
    """The scheduler could not be asked, or refused what it was asked."""


class NoStates(SchedulerError):
    """The backend cannot read node states at all (a drain command), as opposed to failing to read them."""


@dataclass(frozen=True)
class NodeState:
    state: str  # the scheduler's word, lower case, flag taken off: idle, mixed, allocated, drained, draining, down
    reason: str = ""
    reason_user: str = ""
    # False where the scheduler says so (Slurm's `*`); a node shown with another flag may not respond either.
    responding: bool = True
    flag: str = ""  # the one mark Slurm puts after the word, if any: * ~ # ! % $ @ ^ - +
    # Slurm's DRAIN flag, where the backend reads it apart from the word (a word may hide it, see above).
    drain: bool = False
    node: str = ""  # the scheduler's name for the host where it is not the inventory's (names.py)

    @property
    def drained(self) -> bool:
        return self.state in DRAINED or self.drain

    @property
    def rebooting(self) -> bool:
        """A reboot is asked for or under way; resuming the node would cancel it."""
        return self.state in REBOOTING_STATES or self.flag in REBOOTING_FLAGS

    @property
    def out_of_service(self) -> bool:
        """Taken out by someone (or by Slurm itself), or not known to be in service: its reason, if any, is
        what brings it back, and a drain must not replace it."""
        return self.state not in IN_SERVICE or self.drained or self.rebooting

    @property
    def drained_by_fabnet(self) -> bool:
        return self.drained and self.reason.startswith(REASON_PREFIX)


@dataclass(frozen=True)
class Ran:
    """What a backend ran for one host and what it answered, for a backend that can say."""

    command: str  # as a shell would read it
    exit_code: int | None  # None: it never ran to an end (not found, timed out)
    output: str
    error: str | None  # None: done


class Scheduler(Protocol):
    def drain(self, reasons: Mapping[str, str]) -> Mapping[str, str | Ran | None]:
        """Drain each host with its reason; host -> None when done, else the scheduler's error, or a Ran
        that says what was run as well (a host left out counts as done)."""
        ...

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        """Return drained hosts to service; host -> None when done, else the scheduler's error."""
        ...

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        """The hosts' states; a host the scheduler does not know is left out."""
        ...

    def nodes_of_job(self, jobid: str) -> list[str]:
        """The hosts a job runs on (raises SchedulerError for an unknown or pending job)."""
        ...

    def expand(self, hostlist: str) -> list[str]:
        """The names a hostlist expression stands for (raises hostlist.HostlistError)."""
        ...
