"""What launchers and schedulers print when a rank ends: each report read into an `End` (which rank, on which
host, by which signal or exit code), the way Open MPI (ORTE and PRRTE), MPICH's Hydra, Slurm (srun and
slurmstepd), torch.distributed.elastic and the kernel's OOM killer word it across their releases.

Read by structure, not by one sample: the launcher's name in front (`mpirun`, `prterun`, `mpiexec`), a host
label in front of the line (`gpu04: `, syslog's `gpu04 kernel: `, `slurmstepd-gpu04: `), help texts a
terminal wrapped over two lines, and torch's failure table in its layouts from 1.9 (`msg:`, no host) to 2.x
(`host      :`, `traceback :`, a signal name after the pid).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field

from provisioner.explain.kubexec import AGENT_FAILED
from provisioner.explain.logs import Log, LogLine
from provisioner.parsers._loggers import HOST_LABEL

# How a rank ended. `oom`: the kernel or the cgroup killed it for memory; `limit`/`node`/`cancel`: the
# scheduler ended the step (time limit, node failure, cancelled); `missing`: its executable was not there;
# `daemon`: the launcher's own daemon on a node failed; `exit`: it returned a non-zero code by itself.
# `heartbeat`: a node's agent stopped answering torch's rendezvous; `terminated`: SIGTERM, which launchers send
# to the ranks left after one failed; `task-failure`: Slurm's verdict that it ended the step because a task failed,
# which reads like a cancel; `requeue`: Slurm ended the job to queue it again; `job-failed`: Slurm ended the steps
# left of a job it had already marked FAILED. Those last two follow another failure or decision: no cause by
# themselves (rules_stepd names them under the one the log holds).
KINDS = ("signal", "exit", "oom", "limit", "node", "cancel", "missing", "daemon", "heartbeat", "terminated",
         "task-failure", "requeue", "job-failed")
# slurmstepd's verdicts on a step or job, which the `*** REASON: ... ***` line after them explains.
VERDICTS = ("limit", "node", "cancel", "task-failure", "requeue", "job-failed")


@dataclass
class End:
    kind: str
    lines: list[LogLine]
    host: str | None = None
    rank: str | None = None  # as the launcher names it: a global rank, `task 3`, `local_rank 3`
    signal: int | None = None
    code: int | None = None
    what: str = ""  # the launcher's own words for it (`Killed`, `TIME LIMIT`, the executable)
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A log shared with its node names masked (`ON ... CANCELLED`, `on node ***`) names no host.
        if self.host is not None and not re.search(r"[0-9A-Za-z]", self.host):
            self.host = None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# What names the node in front of one line that the log reader gave no host: `gpu04 kernel: ...` (syslog, its
# timestamp already taken off), `slurmstepd-gpu04: ...` (Slurm 21.08 on names its node in the log prefix).
_OWN = re.compile(r"^(?:slurmstepd-(?P<c>[\w.-]+?):|(?P<b>[A-Za-z][\w.-]*) kernel:)")


def own_host(line: LogLine) -> str | None:
    if line.host:
        return line.host
    if m := _OWN.match(line.text):
        return m.group("b") or m.group("c")
    # A pdsh/clush label on this line alone: the log reader takes one off a line only where most lines carry
    # one or NCCL's level follows (`eth0: link down` has the same shape), but before a launcher's or the
    # kernel's report of a rank that ended it can only name the host.
    return label.group("host") if (label := HOST_LABEL.match(line.text)) else None


def _window(log: Log, index: int, count: int) -> list[LogLine]:
    """The line at `index` and the `count` non-blank lines after it (a help text's blank lines are not kept)."""
    return log.lines[index:index + count + 1]


def _joined(lines: list[LogLine]) -> str:
    return " ".join(ln.text.strip("= ").strip() for ln in lines)


# --- Open MPI: ORTE (1.x to 4.x, `mpirun`/`orterun`) and PRRTE (5.x, `prterun`/`mpirun`), help-orterun.txt /
# help-prterun.txt; the sentence may wrap after `on` or `exited on`.
_OMPI_SIGNAL = re.compile(r"noticed that process rank (?P<rank>[0-9]+) with PID (?P<pid>[0-9]+) on\s+node "
                          r"(?P<host>[^\s,]+?),? exited on\s+signal (?P<sig>[0-9]+)(?:\s*\((?P<name>[^)]*)\))?")
_OMPI_IMPROPER = re.compile(r"exited due to process rank (?P<rank>[0-9]+) with PID (?P<pid>[0-9]+) on\s+node "
                            r"(?P<host>\S+) exiting improperly")
_OMPI_NONZERO = re.compile(r"detected that one or more processes exited with non-zero status")
_OMPI_PROCESS = re.compile(r"Process name:\s*\[(?:\[[0-9]+,[0-9]+\],|[^\]@]*@[0-9]+,)(?P<rank>[0-9]+)\]")
_OMPI_CODE = re.compile(r"Exit code:\s*(?P<code>-?[0-9]+)")
_OMPI_NODE = re.compile(r"^\s*(?:Node|Hostname|Host|Local host):\s*(?P<host>\S+)", re.I)
_OMPI_RETURNED = re.compile(r"Primary job\s+terminated normally, but (?P<n>[0-9]+) process(?:es)? returned")
_OMPI_EXE = re.compile(r"unable to launch the specified application as it could not access\s+or execute an "
                       r"executable|unable to find the specified executable file")
_OMPI_EXE_FIELD = re.compile(r"^\s*(?P<key>Executable|Node):\s*(?P<value>\S+)")
_OMPI_DAEMON = re.compile(r"(?:ORTE|PRTE|\S+) was unable to reliably start one or more daemons|"
                          r"An? (?:ORTE|PRTE) daemon has unexpectedly failed after launch")
_OMPI_LOST = re.compile(r"has lost communication with (?:its daemon located on node|a remote daemon)")
_OMPI_LOST_HOST = re.compile(r"^\s*(?:hostname:\s*(?P<a>\S+)|Remote daemon\s*:.*?\bon node (?P<b>\S+))")
# What often precedes a daemon that did not start: the ssh client's own failures (OpenSSH's wordings: a
# connection refused, timed out or unrouted, a name that does not resolve, a key refused or not known). The host
# is whatever the client printed, a masked one included.
SSH_FAILED = re.compile(r"ssh: connect to host (?P<host>\S+) port [0-9]+:|ssh: Could not resolve hostname "
                        r"(?P<host2>[^\s:]+)|Permission denied \(publickey|Host key verification failed")


def ssh_host(line: LogLine) -> str | None:
    m = SSH_FAILED.search(line.text)
    return (m["host"] or m["host2"]) if m else None


def _open_mpi(log: Log) -> list[End]:
    ends: list[End] = []
    ssh_failed = False
    for index, line in enumerate(log.lines):
        # kubectl failing as mpi-operator's agent leaves the same lost daemon ssh does.
        ssh_failed = ssh_failed or any(p.search(line.text) is not None for p in (SSH_FAILED, AGENT_FAILED))
        two = _window(log, index, 1)
        text = _joined(two)
        if "noticed that process rank" in line.text and (m := _OMPI_SIGNAL.search(text)):
            sig = int(m["sig"])
            ends.append(End("terminated" if sig == 15 else "signal", two, m["host"], f"rank {m['rank']}", signal=sig,
                            what=m["name"] or signal_name(sig)))
        elif "exited due to process rank" in line.text and (m := _OMPI_IMPROPER.search(text)):
            ends.append(End("exit", two, m["host"], f"rank {m['rank']}", what="exited without finalizing MPI"))
        elif "detected that one or more" in line.text and _OMPI_NONZERO.search(text):
            block = _window(log, index, 7)
            body = _joined(block)
            rank, code = _OMPI_PROCESS.search(body), _OMPI_CODE.search(body)
            host = next((n["host"] for ln in block if (n := _OMPI_NODE.match(ln.text))), None)
            ends.append(End("exit", block, host, f"rank {rank['rank']}" if rank else None,
                            code=int(code["code"]) if code else None, what="a non-zero exit code"))
        elif "Primary job" in line.text and (m := _OMPI_RETURNED.search(text)):
            ends.append(End("exit", two, what=f"{m['n']} process(es) returned a non-zero exit code"))
        elif "unable to" in line.text and _OMPI_EXE.search(text):
            block = _window(log, index, 7)
            fields = {m["key"]: m["value"] for ln in block if (m := _OMPI_EXE_FIELD.match(ln.text))}
            ends.append(End("missing", block, fields.get("Node") or own_host(line),
                            what=fields.get("Executable", "")))
        elif "daemon" in line.text and _OMPI_DAEMON.search(text):
            ends.append(End("daemon", [line], own_host(line), what=line.text))
        elif "lost communication" in line.text and _OMPI_LOST.search(text):
            block = _window(log, index, 4)
            host = next((h["a"] or h["b"] for ln in block if (h := _OMPI_LOST_HOST.match(ln.text))), None)
            # PRRTE says it lost a daemon that ssh never started: after the ssh client's own failure it is the
            # launch that failed, not a node that went away under a running job.
            ends.append(End("daemon" if ssh_failed else "node", block, host, what="the launcher lost its daemon there"))
    return ends


# --- MPICH's Hydra (3.x, 4.x) and Intel MPI: a `=`-framed block. Hydra reports a signalled process's signal as
# its EXIT CODE (`EXIT CODE: 9` with `... EXIT STRING: Killed (signal 9)`); 3.3 on adds `RANK n` and, in
# Intel MPI, `KILLED BY SIGNAL: 9 (Killed)`.
_HYDRA_AT = re.compile(r"(?:RANK (?P<rank>[0-9]+) )?PID (?P<pid>[0-9]+) RUNNING AT (?P<host>\S+)")
_HYDRA_CODE = re.compile(r"EXIT (?:CODE|STATUS):\s*(?P<code>[0-9]+)")
_HYDRA_SIGNAL = re.compile(r"KILLED BY SIGNAL:\s*(?P<sig>[0-9]+)|EXIT STRING:.*?\(signal (?P<sig2>[0-9]+)\)")
# Codes Hydra reports for a signal rather than a return (a shell's 128+N counts too).
_SIGNAL_CODES = {6, 7, 9, 11}


def _hydra(log: Log) -> list[End]:
    ends = []
    for index, line in enumerate(log.lines):
        if "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" not in line.text:
            continue
        block = _window(log, index, 8)
        body = _joined(block)
        if not (at := _HYDRA_AT.search(body)):
            continue
        code = int(c["code"]) if (c := _HYDRA_CODE.search(body)) else None
        sig = int(s["sig"] or s["sig2"]) if (s := _HYDRA_SIGNAL.search(body)) else None
        if sig is None and code is not None and (code in _SIGNAL_CODES or 128 < code < 160):
            sig = code - 128 if code > 128 else code
        kind = "exit" if sig is None else "terminated" if sig == 15 else "signal"
        used = [ln for ln in block if ln.text.strip("= ")]
        rank = f"rank {at['rank']}" if at["rank"] else None
        ends.append(End(kind, used[:4], at["host"], rank, signal=sig, code=code if sig is None else None,
                        what=signal_name(sig) if sig else f"exit code {code}"))
    return ends


# --- Slurm (src/srun, src/slurmd/slurmstepd): `srun: error: gpu04: task 3: Killed` / `tasks 0-3: Exited with
# exit code 1` / `task 3: Segmentation fault (core dumped)` / `task 3: Out Of Memory`; `*** STEP 1234.0 ON gpu04
# CANCELLED AT <time> DUE TO TIME LIMIT ***` (JOB too; 15.08 on: before, `*** STEP 1234.0 CANCELLED AT <time> ***
# on gpu04`, `DUE TO TIME LIMIT on gpu04 ***`, `DUE TO NODE gpu04 FAILURE ***`), with no `DUE TO` for a cancel
# up to 24.11 and `DUE to SIGNAL Killed` from 25.05 (req.c, _handle_signal_container), `DUE TO JOB REQUEUE` for a
# job queued again (14.11 on; 14.11 to 15.08 with no `ON <node>`); the cgroup's
# `Detected 1 oom_kill event in StepId=1234.0` (21.08 on) / `Detected 1 oom-kill event(s) in step 1234.0 cgroup`
# (17.11 to 20.11) / `Job 41176 exceeded memory limit (3940736 > 2068480), being killed` (jobacct, older).
_SRUN_TASK = re.compile(r"srun: error: (?P<host>[^\s:]+): tasks? (?P<tasks>[0-9][0-9,\-\[\]]*): (?P<what>.+?)\s*$")
_SRUN_WORDS = {"killed": 9, "segmentation fault": 11, "aborted": 6, "bus error": 7, "terminated": 15,
               "illegal instruction": 4, "floating point exception": 8}
_STEP_CANCELLED = re.compile(r"\*\*\* (?:JOB|STEP) (?P<id>\S+) (?:ON (?P<host>\S+) )?CANCELLED AT (?P<at>\S+)"
                             r"(?: DUE TO (?P<why>[\w ,]+?))?(?: on (?P<host2>\S+))?\s*\*\*\*(?: on (?P<host3>\S+))?",
                             re.I)
# srun ending a step itself says so first (src/srun/launch.c, _step_signal): `srun: Terminating StepId=1234.0`
# (20.11 on; `srun: launch/slurm: _step_signal: Terminating StepId=...` where the log names the function),
# `srun: Terminating job step 1234.0` before. It does so after a task failed (--kill-on-bad-exit, SIG_TERM_KILL)
# or --wait ran out after the first exit, and slurmstepd then logs the cancel: `CANCELLED AT <time> ***` up to
# 24.11, `CANCELLED AT <time> DUE TO TASK FAILURE ***` from 25.05 (the PMI plugins' kill words it so too).
_SRUN_TERMINATING = re.compile(r"\bsrun(?:\.\w+)?: (?:[\w/]+: )*Terminating (?:job step )?(?:StepId=)?"
                               r"(?P<id>[0-9]+\.\S+)")
# sacct's State of a job an operator cancelled: `CANCELLED by 1000` (the uid; src/sacct/print.c).
_BY_UID = re.compile(r"\bCANCELLED by [0-9]+\b")
_SLURM_OOM = re.compile(r"Detected (?P<n>[0-9]+) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )?"
                        r"(?P<step>[\w.]+)|(?:Job|Step) (?P<step2>[\w.]+) exceeded memory limit")
_NODE_FAILURE = re.compile(r"srun: error: Node failure on (?P<host>\S+)")
_LAUNCH_FAILED = re.compile(r"Task launch for (?:StepId=)?(?P<step>\S+) failed on node (?P<host>[^\s:]+):\s*"
                            r"(?P<why>.*)")
_EXECVE = re.compile(r"execve\(\): (?P<exe>[^:]+): (?P<why>No such file or directory|Permission denied)")
STEP_FAILED = re.compile(r"srun: error: Unable to create (?:job )?step for job (?P<job>[0-9]+):\s*(?P<why>.*)")
# slurmstepd's verdict when slurmctld ends the steps left of a job it marked FAILED (its batch script or a launch
# failed, SIG_FAILURE; req.c, _handle_signal_container): `*** STEP 1234.0 ON gpu04 FAILED (non-zero exit code or
# other failure mode) ***` (JOB too; 14.11.10 on), `*** JOB 1234 FAILED (...) on gpu04 ***` (14.03.8 to 14.11.9),
# `*** JOB 1234 FAILED (...) ***` (1.3.5 to 14.03.7). The node is the step's first, the stepd that printed it.
_JOB_FAILED = re.compile(r"\*\*\* (?:JOB|STEP) (?P<id>\S+) (?:ON (?P<host>\S+) )?FAILED \(non-zero exit code or other "
                         r"failure mode\)(?: on (?P<host2>\S+))? \*\*\*")
# The reason slurmctld gave for ending the job (its state description: `RaisedSignal:9(Killed)`, `Job is at or
# exceeds QOS normal's max TRES(cpu) minutes of ...`, `Reservation R, which this job was running under, has ended`,
# `job requeued in held state`), printed right after the verdict it explains (22.05 on): `*** REASON: %s ***`.
REASON = re.compile(r"\*\*\* REASON: (?P<why>.+?)\s*\*\*\*\s*$")


def _cancel(m: re.Match[str], line: LogLine, srun: LogLine | None) -> End:
    """slurmstepd's verdict on a step or job: a limit, a node failure, a cancel, or (`srun`: the Terminating line
    srun printed for that step after a task failed) srun's own end of the step."""
    why = (m["why"] or "").split(",")[0].strip().upper()
    node = re.search(r"NODE (\S+) FAILURE", m["why"] or "", re.I)  # before 15.08: `DUE TO NODE gpu04 FAILURE`
    host = m["host"] or m["host2"] or m["host3"] or (node[1] if node else None)
    if why == "TASK FAILURE" or (srun is not None and (not why or why.startswith("SIGNAL"))):
        return End("task-failure", [ln for ln in (srun, line) if ln], host, what="TASK FAILURE",
                   extra={"step": m["id"]})
    # A requeue (14.11 on; a node failure's wording before) ends the run to start it again: no cancel by anyone.
    kind = ("limit" if "TIME" in why else "node" if "NODE" in why else "requeue" if why == "JOB REQUEUE"
            else "cancel")
    if kind in ("limit", "cancel") or (kind == "node" and not node):
        # The node in `ON <node>` (or `on <node>`) is where the step's first daemon printed the verdict, not a
        # node at fault: a time limit or a cancel ends every node's ranks, and a failed node is named by
        # srun's `Node failure on` line or, before 15.08, inside the verdict itself.
        logged = host if host and re.search(r"[0-9A-Za-z]", host) else ""  # a masked name (`...`) names none
        return End(kind, [line], None, what=why or "CANCELLED", extra={"step": m["id"], "logged_on": logged})
    return End(kind, [line], host, what=why or "CANCELLED", extra={"step": m["id"]})


def _reason(ends: list[End], line: LogLine, why: str) -> bool:
    """Give slurmstepd's REASON line to the verdict just before it in this log (the stepd prints the two together;
    a few lines of the ranks' output may come between); False where none did."""
    verdict = next((e for e in reversed(ends) if e.kind in VERDICTS), None)
    if verdict is None or not 0 < line.number - verdict.lines[-1].number <= 5:
        return False
    verdict.lines.append(line)
    verdict.extra["reason"] = why
    return True


def _early(verdict: End, reason: tuple[LogLine, str] | None) -> None:
    """Give the verdict a REASON line printed just before it."""
    if reason is not None and 0 < verdict.lines[-1].number - reason[0].number <= 5:
        verdict.lines.append(reason[0])
        verdict.extra["reason"] = reason[1]


def _slurm(log: Log) -> list[End]:
    ends: list[End] = []
    # srun's Terminating line for each step, where a task's failure came before it; none where sacct says an
    # operator cancelled the job.
    terminating: dict[str, LogLine] = {}
    operator = any(_BY_UID.search(line.text) for line in log.lines)
    reason: tuple[LogLine, str] | None = None  # a REASON line seen before any verdict
    for line in log.lines:
        text = line.text
        # An exit of 143 (128 + SIGTERM) is a task that was itself asked to stop, by a cancel as often as not.
        if (t := _SRUN_TERMINATING.search(text)) and not operator and any(
                e.kind == "signal" or (e.kind == "exit" and e.code != 143) for e in ends):
            terminating.setdefault(t["id"], line)
        elif m := _SRUN_TASK.search(text):
            what = m["what"]
            words = re.sub(r"\s*\(core dumped\)", "", what).lower()
            code = re.search(r"exit code (?P<code>[0-9]+)", what)
            rank = f"task {m['tasks']}"
            if code:
                if int(code["code"]):
                    ends.append(End("exit", [line], m["host"], rank, code=int(code["code"]), what=what))
            elif "out of memory" in words:
                ends.append(End("oom", [line], m["host"], rank, what=what))
            elif words in _SRUN_WORDS:
                sig = _SRUN_WORDS[words]
                ends.append(End("terminated" if sig == 15 else "signal", [line], m["host"], rank, signal=sig,
                                what=what))
        elif m := _STEP_CANCELLED.search(text):
            ends.append(_cancel(m, line, terminating.get(m["id"])))
            _early(ends[-1], reason)
            reason = None
        elif m := _JOB_FAILED.search(text):
            ends.append(End("job-failed", [line], m["host"] or m["host2"], what="FAILED", extra={"step": m["id"]}))
            _early(ends[-1], reason)
            reason = None
        elif m := REASON.search(text):
            # Printed after the verdict; a signal that carries the reason and no verdict (the SIGCONT slurmd sends
            # before a cancel's SIGTERM) prints it before the verdict too.
            reason = None if _reason(ends, line, m["why"]) else (line, m["why"])
        elif m := _SLURM_OOM.search(text):
            ends.append(End("oom", [line], own_host(line), what=text, extra={"step": m["step"] or m["step2"] or ""}))
        elif m := _NODE_FAILURE.search(text):
            ends.append(End("node", [line], m["host"], what="node failure"))
        elif m := _LAUNCH_FAILED.search(text):
            ends.append(End("daemon", [line], m["host"], what=m["why"]))
        elif m := _EXECVE.search(text):
            ends.append(End("missing", [line], own_host(line), what=m["exe"].strip(), extra={"why": m["why"]}))
    return ends


# --- torch.distributed.elastic (torch/distributed/elastic/multiprocessing/api.py and errors/__init__.py):
# `failed (exitcode: -9) local_rank: 3 (pid: 123) of binary: ...` (`of fn:` too), and ChildFailedError's table:
# `Root Cause (first observed failure):` (1.10 on; `Root Cause:` in 1.9), then `host      : gpu04`, `rank      : 3
# (local_rank: 3)`, `exitcode  : -9 (pid: 123)`, `traceback : Signal 9 (SIGKILL) received by PID 123`.
_TORCH_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?[0-9]+)\) local_rank: (?P<rank>[0-9]+) \(pid: "
                           r"(?P<pid>[0-9]+)\) of (?:binary|fn)")
_ROOT = re.compile(r"^Root Cause\b")
_BORDER = re.compile(r"^(?:[=*-]{10,}|Other Failures:?|Failures:?)\s*$")
_TABLE_HOST = re.compile(r"\bhost\s*:\s*(?P<host>[^\s(]+)")
_TABLE_RANK = re.compile(r"\brank\s*:?\s*(?P<rank>[0-9]+)")
_TABLE_CODE = re.compile(r"exitcode\s*:\s*(?P<code>-?[0-9]+)")
_HEARTBEAT = re.compile(r"The node '(?P<node>[^']+)' has failed to send a keep-alive heartbeat to the rendezvous "
                        r"'(?P<rdzv>[^']*)'(?: due to an error of type (?P<error>\w+))?")


def _from_code(kind_line: list[LogLine], code: int, host: str | None, rank: str) -> End:
    if code < 0:
        sig = -code
        return End("terminated" if sig == 15 else "signal", kind_line, host, rank, signal=sig, what=signal_name(sig))
    return End("exit", kind_line, host, rank, code=code, what=f"exit code {code}")


def _torch(log: Log) -> list[End]:
    ends = []
    for index, line in enumerate(log.lines):
        if m := _TORCH_FAILED.search(line.text):
            if int(m["code"]):
                ends.append(_from_code([line], int(m["code"]), own_host(line), f"local_rank {m['rank']}"))
        elif _ROOT.match(line.text):
            block = [line]
            for after in _window(log, index, 10)[1:]:
                if _BORDER.match(after.text) and len(block) > 2:
                    break
                block.append(after)
            body = " ".join(ln.text for ln in block)
            code = _TABLE_CODE.search(body)
            if code is None or not int(code["code"]):
                continue
            rank = _TABLE_RANK.search(body.split("exitcode")[0])
            host = _TABLE_HOST.search(body)
            end = _from_code(block, int(code["code"]), host["host"] if host else own_host(line),
                             f"rank {rank['rank']}" if rank else "a rank")
            end.extra["root"] = "1"
            ends.append(end)
        elif m := _HEARTBEAT.search(line.text):
            # The node's name is `<hostname>_<pid>_<n>` (c10d/etcd rendezvous).
            node = re.sub(r"_[0-9]+_[0-9]+$", "", m["node"])
            ends.append(End("heartbeat", [line], node, what="missed the rendezvous heartbeat",
                            extra={"error": m["error"] or ""}))
    return ends


# --- The kernel's OOM killer (mm/oom_kill.c): `Out of memory: Killed process 123 (python) ...` (4.19 on; `Kill
# process 123 (python) score N or sacrifice child` before), `Memory cgroup out of memory: Killed process ...`, and
# `oom-kill:constraint=CONSTRAINT_MEMCG,...,task=python,pid=123,uid=0` (4.19 on).
_KERNEL_OOM = re.compile(r"(?:Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process (?P<pid>[0-9]+) "
                         r"\((?P<comm>[^)]*)\)|oom-kill:constraint=(?P<constraint>\w+).*?task=(?P<comm2>[^,]+),pid=(?P<pid2>[0-9]+)")


def _kernel(log: Log) -> list[End]:
    ends = []
    for line in log.lines:
        if m := _KERNEL_OOM.search(line.text):
            what = f"{m['comm'] or m['comm2']} (pid {m['pid'] or m['pid2']})"
            ends.append(End("oom", [line], own_host(line), what=what, extra={"constraint": m["constraint"] or ""}))
    return ends


def read_ends(log: Log) -> list[End]:
    """Every report in the log of a rank that ended, or of a scheduler or launcher that ended it."""
    return _open_mpi(log) + _hydra(log) + _slurm(log) + _torch(log) + _kernel(log)
