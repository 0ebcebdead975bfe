"""Causes the launcher and the scheduler report: a rank killed by a signal or by the OOM killer, a step ended
at its time limit or by a node failure, an executable missing on a node, a launcher daemon that failed, a
node that left torch's rendezvous, and a rank that returned a non-zero code.

A rank that died is the cause and the collective errors the other ranks print after it (connection closed
by peer, a watchdog timeout) its consequence: a signal or a scheduler's verdict ranks above every network
cause but a missing device, and a job where one is seen is never blamed on the path (see rules.SUPERSEDES).
A non-zero exit code ranks low: a rank usually returns one because of the error it printed first. The SIGKILL srun
sends the other tasks after one exits non-zero is that exit's consequence, and ranks just under it; so is the cancel
slurmstepd logs when srun ends the step so (launch_lines reads it apart from an operator's: no cause of its own).
"""

from __future__ import annotations

import re

from provisioner.explain import kubexec
from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.launch_lines import SSH_FAILED, STEP_FAILED, End, read_ends, signal_name, ssh_host
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.pmix_status import HANDLER, LOCAL
from provisioner.explain.pmix_status import named as pmix_status
from provisioner.parsers._text import unique

# Causes that mean a rank or node was taken away: with one of them, traffic that stopped is no path's fault.
DEATHS = {"rank-killed", "rank-oom", "step-time-limit", "node-failure", "job-cancelled", "missing-executable",
          "launcher-daemon-failed"}
# What a death says of the errors after it; a cause that demotes it (rules_pmix.lead) takes the sentence out.
CONSEQUENCE = (" The connection errors and collective timeouts the other ranks report after it are its "
               "consequence, not a network fault.")
_RDZV_TIMEOUT = re.compile(r"RendezvousTimeoutError|RendezvousClosedError")
_IN_USE = re.compile(r"EADDRINUSE|Address already in use|failed to listen on any local network address")
_RAS_CLIENT = re.compile(r"RAS failed to establish a client listening socket")


def _who(end: End) -> str:
    parts = [end.rank or "a rank"]
    if end.host:
        parts.append(f"on {end.host}")
    return " ".join(parts)


def _how(end: End) -> str:
    if end.signal is not None:
        return f"signal {end.signal} ({signal_name(end.signal)})"
    return f"exit code {end.code}" if end.code is not None else end.what


def _lines(ends: list[End]) -> list[LogLine]:
    return [line for end in ends for line in end.lines]


def _where(ends: list[End]) -> list[str]:
    return unique([e.host for e in ends if e.host] + hosts(_lines(ends)))


def _cause(id_: str, title: str, detail: str, fix: str, score: int, ends: list[End],
           where: list[str] | None = None) -> Cause:
    return Cause(id=id_, title=title, detail=detail, fix=fix, score=score,
                 hosts=where if where is not None else _where(ends), evidence=evidence(_lines(ends)))


def _ended(ends: list[End]) -> tuple[str, list[LogLine]]:
    """Slurm ending the step itself after a task failed (srun's Terminating line, then slurmstepd's cancel): the
    sentence naming it the failure's consequence, and its lines."""
    ended = [e for e in ends if e.kind == "task-failure"]
    steps = unique([e.extra["step"] for e in ended if e.extra.get("step")])
    return ((f" Slurm then ended step {', '.join(steps) or 'the step'} itself (srun's `Terminating`, slurmstepd's "
             "`CANCELLED`): that cancel is this failure's consequence, not an operator's scancel.") if ended else "",
            _lines(ended))


def _killed(ends: list[End]) -> list[Cause]:
    signalled = [e for e in ends if e.kind == "signal"]
    if not signalled:
        return []
    said, ended = _ended(ends)
    first = next((e for e in signalled if e.host), signalled[0])
    listing = "; ".join(unique([f"{_who(e)}: {_how(e)}" for e in signalled]))
    kill = any(e.signal == 9 for e in signalled)
    detail = (f"{listing}. " + ("SIGKILL comes from outside the process: the kernel's OOM killer (check dmesg on "
                                "that host), the scheduler enforcing a limit, or an operator." if kill else
                                "The process crashed itself (a bad access, an abort): its own output just before "
                                "the signal says where.") + said + CONSEQUENCE)
    cause = _cause("rank-killed", f"{_who(first)} was killed by {_how(first)}", detail,
                   "Read that rank's output and the host's kernel log (`dmesg -T | grep -i -e oom -e killed`) "
                   "around that time; for SIGKILL check the job's memory limits, for a crash its core dump.",
                   88, signalled)
    shown = sorted(_lines(signalled) + ended, key=lambda ln: (ln.file, ln.number))
    return [cause.model_copy(update={"evidence": evidence(shown)})] if ended else [cause]


def _oom(ends: list[End]) -> list[Cause]:
    oom = [e for e in ends if e.kind == "oom"]
    if not oom:
        return []
    where = _where(oom)
    killed = [e for e in ends if e.kind == "signal" and e.signal == 9 and (not where or e.host in where)]
    what = unique([e.what for e in oom if "(pid" in e.what])
    memcg = any("MEMCG" in e.extra.get("constraint", "") or e.extra.get("step") for e in oom)
    detail = ("the out-of-memory killer ended " + (", ".join(what) if what else "a rank's process")
              + (f" on {', '.join(where)}" if where else "")
              + (" at the job's memory limit (its cgroup), not the node's: " if memcg else ": ")
              + "host memory ran out, so the rank died by SIGKILL." + CONSEQUENCE)
    return [_cause("rank-oom", "a rank was killed for memory (OOM)" + (f" on {where[0]}" if where else ""),
                   detail, "Give the job more host memory (--mem / --mem-per-gpu, the container's limit) or use "
                   "less (smaller batches, fewer data loader workers, pinned-memory pools).", 90, oom + killed,
                   where)]


def _scheduler(ends: list[End]) -> list[Cause]:
    causes = []
    for kind, id_, title, fix, score in (
        ("limit", "step-time-limit", "the scheduler ended the job at its time limit",
         "Ask for more time (--time) or make the run shorter; a job that hung until the limit has its first "
         "error (or its stuck collective) earlier in the log.", 91),
        ("node", "node-failure", "a node failed under the job",
         "Check that node (`scontrol show node`, its kernel log, power and network) and drain it before the "
         "next run.", 91),
        ("cancel", "job-cancelled", "the job was cancelled or preempted",
         "Ask who cancelled it (`sacct -j JOB -o State,Reason`); a preempted job needs --requeue or another QOS.",
         86),
    ):
        found = [e for e in ends if e.kind == kind]
        if found:
            where = [e.host for e in found if e.host]
            logged = unique([e.extra["logged_on"] for e in found if e.extra.get("logged_on")])
            reasons = unique([e.what.lower() for e in found])
            on = f" on {', '.join(where)}" if where else " on the job's nodes" if kind != "node" else ""
            detail = f"{', '.join(reasons)}{on}: the scheduler or launcher took the ranks {'there' if where else ''}"
            detail = detail.rstrip() + " away."
            if logged:
                # slurmstepd prints its verdict on the step's first node only (req.c: nodeid 0), naming that node.
                detail += (f" Slurm's verdict was logged by the step daemon on {', '.join(logged)}, the step's first "
                           "node: it names no node at fault.")
                if kind == "node" and not where:
                    detail += " The failed node is in srun's `Node failure on` line, slurmctld's log or `sinfo -R`."
            causes.append(_cause(id_, title + (f" ({where[0]})" if where else ""), detail + CONSEQUENCE, fix,
                                 score, found, where))
    return causes


def _missing(ends: list[End]) -> list[Cause]:
    missing = [e for e in ends if e.kind == "missing"]
    if not missing:
        return []
    where = _where(missing)
    if not where:  # slurmstepd's execve() line names no node: srun's exit-code line after it does.
        where = _where([e for e in ends if e.kind == "exit" and e.code in (2, 126, 127)])
    exes = unique([e.what for e in missing if e.what])
    why = unique([e.extra.get("why", "") for e in missing if e.extra.get("why")])
    return [_cause("missing-executable", f"{', '.join(exes) or 'the executable'} is missing on "
                   f"{', '.join(where) or 'a node'}",
                   f"the launcher could not start {', '.join(exes) or 'the program'}"
                   + (f" ({', '.join(why)})" if why else "") + f" on {', '.join(where) or 'a node'}: it is not at "
                   "that path there (or not executable), so no rank started on that node.",
                   "Install or copy the binary to the same path on every node (or run it from a shared file "
                   "system) and give its full path; check PATH in the non-interactive shell of that node.",
                   93, missing, where)]


def _daemons(ends: list[End], logs: list[Log]) -> list[Cause]:
    found = [e for e in ends if e.kind == "daemon"]
    if not found:
        return []
    ssh = [line for line, _ in grep(logs, SSH_FAILED)]
    agent = {log.name: lines for log in logs if (lines := kubexec.failures(log))}
    if agent and not ssh:
        return [_kubectl_agent(found, logs, agent)]
    where = unique([h for line in ssh if (h := ssh_host(line))] + _where(found))
    # The ssh client's own words say which of the usual reasons it was: say it first, and how to try it alone.
    said = unique([line.text.split(": ")[-1].strip().rstrip(".") for line in ssh])
    by_ssh = (f" The ssh client failed first ({'; '.join(said)}): no daemon started there, so no rank ran; in a "
              "pod or container sshd is often not running, or listens on another port." if ssh else "")
    return [Cause(id="launcher-daemon-failed", title="the launcher could not start or keep its daemon on a node",
                  detail="mpirun's daemon (orted/prted) or srun's step on " + (', '.join(where) or "a node")
                  + " failed before the ranks ran: ssh or the node's login, a missing Open MPI there, or no "
                  "route back to the launching host." + by_ssh,
                  fix="Check that the launching host reaches every node by ssh without a prompt (`ssh NODE "
                  "hostname` from it, as the user mpirun runs as; another port: `--mca plm_rsh_args \"-p PORT\"`) "
                  "and that Open MPI is installed at the same prefix on each (--prefix or "
                  "--enable-orterun-prefix-by-default); with Slurm read the node's slurmd log.", score=84, hosts=where,
                  evidence=evidence(ssh + _lines(found)))]


def _kubectl_agent(found: list[End], logs: list[Log], agent: dict[str, list[LogLine]]) -> Cause:
    """The daemon mpi-operator's kubectl agent could not start: ssh's failure, in Kubernetes' terms."""
    lines = [line for name in agent for line in agent[name]]
    pods = unique([p for log in logs if log.name in agent for p in kubexec.pods(log, agent[log.name])])
    why = kubexec.reasons(lines)
    return Cause(id="launcher-daemon-failed", title="mpirun's kubectl agent could not start its daemon in "
                 + (", ".join(pods) if pods else "a worker pod"),
                 detail="mpirun starts its daemon (orted/prted) in each worker pod through kubectl exec (Open "
                 "MPI's rsh agent set to kubexec.sh by the MPI operator) where it would use ssh, and kubectl "
                 f"failed{' (' + '; '.join(why) + ')' if why else ''}: no daemon started there, so no rank ran. "
                 "It is the launch that failed, not a node or the network under a running job.",
                 fix="Check the launcher pod: its image has kubectl where kubexec.sh calls it (/opt/kube/kubectl); "
                 "its service account has a Role allowing `get`/`list`/`watch` on pods and `create` on pods/exec "
                 "in the job's namespace (`kubectl auth can-i create pods/exec --as "
                 "system:serviceaccount:NS:SA`); every worker pod is Running and Ready before mpirun starts "
                 f"({kubexec.worker_pods(logs)}), and orted is on their PATH.",
                 score=84, hosts=pods or _where(found), evidence=evidence(lines + _lines(found)))


def _heartbeat(ends: list[End], logs: list[Log]) -> list[Cause]:
    found = [e for e in ends if e.kind == "heartbeat"]
    if found:
        where = _where(found)
        return [_cause("rendezvous-node-lost", f"{', '.join(where)} stopped answering the rendezvous",
                       f"torch's elastic agent on {', '.join(where)} missed its keep-alive heartbeat: the node or "
                       "its agent died, or it lost its connection to the rendezvous store.",
                       "Check that node (its agent's output, OOM, reboot) and its path to the rendezvous endpoint.",
                       80, found)]
    if hits := grep(logs, _RDZV_TIMEOUT):
        lines = [line for line, _ in hits]
        return [Cause(id="rendezvous-incomplete", title="the elastic rendezvous timed out",
                      detail="not every node's agent joined (or stayed in) torch's rendezvous in time: a node did "
                             "not start, or cannot reach the rendezvous endpoint.",
                      fix="Check that every node started torchrun with the same --rdzv-endpoint and id and reaches "
                          "that host and port.", score=55, hosts=hosts(lines), evidence=evidence(lines))]
    return []


def _exits(ends: list[End]) -> list[Cause]:
    exited = [e for e in ends if e.kind == "exit"]
    said, ended = _ended(ends)
    if ended and not exited and not any(e.kind == "signal" for e in ends):
        # Slurm's verdict alone (25.05's `DUE TO TASK FAILURE`), the task's own exit line not in the log.
        failed = [e for e in ends if e.kind == "task-failure"]
        return [_cause("rank-exited", f"a task failed and Slurm ended the step ({failed[0].extra.get('step')})",
                       "slurmstepd says it cancelled the step because a task failed (srun --kill-on-bad-exit, or the "
                       "PMI plugin told that a task went away): the task stopped by itself with an error first.",
                       "Read the output of the task that failed (srun's `task N: Exited with exit code` line names "
                       "it) just before its end.", 49, failed)]
    if not exited:
        terminated = [e for e in ends if e.kind == "terminated"]
        if terminated and len(terminated) == len(ends):
            return [_cause("rank-terminated", "ranks were terminated (SIGTERM)",
                           f"{'; '.join(unique([_who(e) for e in terminated]))} ended on SIGTERM: something asked "
                           "them to stop (the scheduler, a cancel, the launcher after another rank failed).",
                           "Find who sent it: the scheduler's log for the job, or the first rank that failed.",
                           47, terminated)]
        return []
    named = [e for e in exited if e.rank or e.host] or exited
    first = next((e for e in named if e.host and e.code is not None), named[0])
    listing = "; ".join(unique([f"{_who(e)}: {_how(e)}" for e in named]))
    return [_cause("rank-exited", f"{_who(first)} exited with {_how(first)}",
                   f"{listing}: the rank stopped by itself with an error; the launcher then ended the others. "
                   "Its own output just before says why." + said,
                   "Read that rank's last lines (a Python traceback, an NCCL WARN); the launcher's line only "
                   "says which one failed first.", 49, exited + [e for e in ends if e.kind == "task-failure"],
                   _where(exited))]


def _step_failed(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, STEP_FAILED)
    if not hits:
        return []
    why = unique([m["why"].strip() for _, m in hits if m["why"].strip()])
    lines = [line for line, _ in hits]
    return [Cause(id="step-create-failed", title="Slurm could not create the job step",
                  detail=f"srun was refused a step ({'; '.join(why) or 'no reason given'}): the request does not "
                         "fit the allocation (nodes, GPUs, memory) or the job was ending.",
                  fix="Ask for no more than the allocation has (srun -N/-n/--gpus within the sbatch request) and "
                      "check `scontrol show job`.", score=70, hosts=hosts(lines), evidence=evidence(lines))]


def _ras_client(log: Log, line: LogLine) -> bool:
    """NCCL's RAS (2.24 on) failing to bind its client port (28028): `ras/client_support.cc:N NCCL WARN Call to
    bind failed: Address already in use` then `RAS failed to establish a client listening socket at ...`. The
    job runs on; only `ncclras` cannot reach it there."""
    after = log.line(line.number + 1)
    return "ras/" in line.text or (after is not None and _RAS_CLIENT.search(after.text) is not None)


def _port_in_use(logs: list[Log]) -> list[Cause]:
    # A UNIX socket's path in use (Slurm's PMIx plugin binding its own) is no port: rules_pmix reads it.
    hits = [(line, m) for log in logs for line, m in log.grep(_IN_USE)
            if not _ras_client(log, line) and "UNIX socket" not in line.text]
    if not hits:
        return []
    lines = [line for line, _ in hits]
    return [Cause(id="port-in-use", title="the rendezvous port is already in use",
                  detail="the store could not listen on its port (EADDRINUSE): another job or a leftover process "
                         "on the master host holds it.",
                  fix="Pick a free --master-port / MASTER_PORT per job, or end the process holding it (`ss -ltnp`).",
                  score=82, hosts=hosts(lines), evidence=evidence(lines))]


# MPI's own start failing before any NCCL call, as each MPI words it: MPICH and Intel MPI (`Fatal error in
# PMPI_Init: Other MPI error, error stack:`, then one `func(line)...: why` line per frame), Open MPI's
# errhandler (`*** An error occurred in MPI_Init_thread`), its help texts (`It looks like MPI_INIT failed`,
# `MPI runtime init`, `orte_init`), its direct launch without the PMI it needs, and the PMI library's own line.
_MPI_INIT = re.compile(r"Fatal error in P?MPI_Init(?:_thread)?\b|An error occurred in MPI_Init(?:_thread)?\b|"
                       r"It looks like (?:MPI_INIT|MPI runtime init|orte_init|ompi_rte_init) failed|"
                       r"direct launched using \"?srun|PMI2?_Init failed|PMI_KVS_Get returned|"
                       r"PMIx? was unable to|OMPI was not built with SLURM's PMI")
# The last frame of an MPICH error stack: its innermost reason (`MPIR_pmi_kvs_get(227)....: PMI_KVS_Get ...`).
_MPI_FRAME = re.compile(r"^\s*\w+\(\d+\)\.*:\s*(?P<why>\S.*)$")


def _mpi_init(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _MPI_INIT)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    # The frames of the stack that follows a hit, in its own log.
    frames = [ln for log in logs for line in lines if line in log.lines
              for ln in log.lines[log.lines.index(line) + 1:log.lines.index(line) + 30] if _MPI_FRAME.match(ln.text)]
    why = [m["why"].strip() for ln in frames if (m := _MPI_FRAME.match(ln.text))]
    srun = any("srun" in line.text or "SLURM's PMI" in line.text for line in lines)
    detail = ("MPI_Init failed in the program before NCCL was called"
              + (f" ({why[-1]})" if why else "") + ": the launcher does not match the MPI the binary was built "
              "with (another MPI's mpirun, srun without the PMI or PMIx that MPI needs), or MPI's own start-up "
              "between the nodes failed. Nothing of NCCL or the fabric was tried.")
    if srun:
        detail += " Here srun started it directly, and the MPI found no PMI it could use."
    return [Cause(id="mpi-init-failed", title="MPI itself failed to start (MPI_Init)", detail=detail,
                  fix="Run an MPI hello world with the same launcher on the same nodes first; `ldd` of the binary "
                      "and `which mpirun` must name the same MPI (rebuild nccl-tests with MPI_HOME of the MPI you "
                      "launch with); under Slurm pick the PMI it was built for (`srun --mpi=list`, "
                      "`srun --mpi=pmix`) or start it with mpirun.", score=80, hosts=hosts(lines),
                  evidence=evidence(lines + frames[-1:]))]


def _gone(logs: list[Log]) -> list[LogLine]:
    """Slurm's PMIx plugin told by the PMIx library that a task's client went away (`Error handler invoked:
    status = -61`, a status of LOCAL): the plugin's error handler then kills the step."""
    return [line for log in logs for line in log.lines
            if "mpi/pmix" in line.text and (m := HANDLER.search(line.text)) and m["status"] in LOCAL]


def _bad_exit(ends: list[End], gone: list[LogLine]) -> list[End]:
    """The exits srun's SIGKILL of the other tasks followed: srun ends a step when one task exits non-zero
    (--kill-on-bad-exit, KillOnBadExit), and Slurm's PMIx plugin when a task's PMIx client goes away. The exit
    (or the plugin's line) comes before the kill in srun's output. Empty where the kill came first, was not srun's
    SIGKILL, or the OOM killer, a cancel, a limit or a node failure is seen: those lead as they are."""
    if any(e.kind in ("oom", "cancel", "limit", "node") for e in ends):
        return []
    signalled = [e for e in ends if e.kind == "signal"]
    exited = [e for e in ends if e.kind == "exit"]
    if not signalled or not exited or any(e.signal != 9 or "srun: error:" not in e.lines[0].text for e in signalled):
        return []
    kill: dict[str, int] = {}  # the first kill's line in each log
    for ln in _lines(signalled):
        kill[ln.file] = min(kill.get(ln.file, ln.number), ln.number)
    before = [e for e in exited if any(ln.file in kill and ln.number < kill[ln.file] for ln in e.lines)]
    told = any(ln.file in kill and ln.number < kill[ln.file] for ln in gone)
    return before or (exited if told else [])


def _kill_follows(causes: list[Cause], first: list[End], ends: list[End], gone: list[LogLine]) -> list[Cause]:
    """The exit leads and the kill is named as its consequence, ranked just under it."""
    lead = next((e for e in first if e.host and e.code is not None), first[0])
    said = unique([pmix_status(m["status"], m["rank"]) for ln in gone if (m := HANDLER.search(ln.text))])
    plugin = f", and Slurm's PMIx plugin had reported {'; '.join(said[:3])}" if said else ""
    exited = next(c for c in causes if c.id == "rank-exited")
    exits = [e for e in ends if e.kind == "exit"]
    listing = "; ".join(unique([f"{_who(e)}: {_how(e)}" for e in ends if e.kind == "signal"]))
    # The exits and the plugin's first lines in log order; the plugin logs one line per task gone.
    shown = evidence(sorted(_lines(exits) + gone[:2] + _ended(ends)[1], key=lambda ln: (ln.file, ln.number)))
    out = []
    for c in causes:
        if c.id == "rank-killed":
            c = c.model_copy(update={
                "title": f"{c.title}, after {_who(lead)} exited with {_how(lead)}",
                "detail": f"{listing}. srun ended the rest of the step after {_who(lead)} exited "
                          f"with {_how(lead)}{plugin}: when one task exits non-zero, srun (--kill-on-bad-exit, "
                          "KillOnBadExit) or Slurm's PMIx plugin (its error handler, told the task's PMIx client went "
                          "away) kills the others with SIGKILL. The kill is that exit's consequence, not the OOM "
                          "killer, a limit or an operator." + CONSEQUENCE,
                "fix": "Read the output of the task that exited first, just before its exit; the SIGKILL of the "
                       "others only followed it.",
                "score": exited.score - 1})
        elif c is exited:
            c = c.model_copy(update={
                "detail": c.detail + f" srun then killed the step's other tasks (SIGKILL){plugin}: those kills "
                          "are this exit's consequence.", "evidence": shown})
        out.append(c)
    return out


def launcher_failures(logs: list[Log]) -> list[Cause]:
    ends = [end for log in logs for end in read_ends(log)]
    causes = (_missing(ends) + _scheduler(ends) + _oom(ends) + _daemons(ends, logs) + _heartbeat(ends, logs)
              + _step_failed(logs) + _port_in_use(logs) + _mpi_init(logs))
    oom = next((c for c in causes if c.id == "rank-oom"), None)
    killed = _killed([e for e in ends if not (oom and e.signal == 9 and (not oom.hosts or e.host in oom.hosts))])
    causes += killed + _exits(ends)
    gone = _gone(logs)
    if first := _bad_exit(ends, gone):
        return _kill_follows(causes, first, ends, gone)
    return causes
