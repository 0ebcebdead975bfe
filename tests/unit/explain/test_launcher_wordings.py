"""`explain` on what launchers and schedulers print when a rank dies: the cause names the rank's host and its
signal or exit code, ranks above the collective errors the other ranks print after it, and is never blamed on
the path. Each row is verbatim wording (hosts and numbers changed) with where it comes from:

- Open MPI: orte/tools/orterun/help-orterun.txt and orte/mca/errmgr/base/help-errmgr-base.txt (open-mpi/ompi,
  v1.x to v4.1.x; `mpirun noticed that process rank N with PID P on node H exited on signal S (Name).`, the
  non-zero-exit block, `could not access or execute an executable`, failed-daemon-launch, failed-daemon,
  node-died); PRRTE src/mca/errmgr/base/help-errmgr-base.txt (openpmix/prrte, Open MPI 5: `prterun`, `PRTE`).
- MPICH Hydra: src/pm/hydra (pmiserv) `BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES` block, 3.x and
  4.x (`RANK n PID p RUNNING AT h`, `KILLED BY SIGNAL`), Intel MPI the same.
- Slurm: src/srun/srun_job.c / launch (`srun: error: H: task N: Killed`, `Exited with exit code N`, `Node
  failure on H`, `Unable to create step for job`), src/slurmd/slurmstepd (`*** STEP J.S ON H CANCELLED AT T DUE
  TO TIME LIMIT ***`, oom_kill events in 21.08+ and `oom-kill event(s) in step` before, `execve(): X: No such
  file or directory`).
- torch.distributed.elastic: torch/distributed/elastic/multiprocessing/api.py (`failed (exitcode: -9)
  local_rank: N (pid: P) of binary`) and errors/__init__.py (the ChildFailedError table; issue threads quoted
  on rows), rendezvous/dynamic_rendezvous.py (keep-alive heartbeat).
- Linux mm/oom_kill.c (`Out of memory: Killed process`, `oom-kill:constraint=`).
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain

_BAR = "-" * 74 + "\n"
_EQ = "=" * 83 + "\n"
_TABLE_2X = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" + "=" * 60 + "\ntrain.py FAILED\n"
             + "-" * 60 + "\nFailures:\n  <NO_OTHER_FAILURES>\n" + "-" * 60 + "\nRoot Cause (first observed failure):\n"
             "[0]:\n  time      : 2025-05-21_15:43:03\n  host      : gpu04.cluster\n  rank      : 3 (local_rank: 3)\n"
             "  exitcode  : -9 (pid: 14750)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID "
             "14750\n" + "=" * 60 + "\n")
_NCCL_ECHO = ("gpu01:4021:4188 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
              "gpu04<50334>\n[rank0]:[E0612 10:41:07.512331 78122 ProcessGroupNCCL.cpp:632] [PG 0 Rank 0] Watchdog "
              "caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
              "Timeout(ms)=600000) ran for 600046 milliseconds before timing out.\n")

# (source, log, first cause id, host it must name or None, text its title+detail must hold)
CASES: dict[str, tuple[str, str, str, str | None, str]] = {
    # --- Open MPI / PRRTE
    "ompi-signal-9": ("Open MPI 4.1 help-orterun.txt", _BAR + "mpirun noticed that process rank 3 with PID 12345 on "
                      "node gpu04 exited on signal 9 (Killed).\n" + _BAR, "rank-killed", "gpu04", "SIGKILL"),
    "ompi-signal-11": ("Open MPI 1.8 help-orterun.txt", "mpirun noticed that process rank 1 with PID 0 on node gpu02 "
                       "exited on signal 11 (Segmentation fault).\n", "rank-killed", "gpu02", "SIGSEGV"),
    "prterun-signal": ("Open MPI 5 / PRRTE help-prterun.txt", "prterun noticed that process rank 3 with PID 12345 on "
                       "node gpu04 exited on\nsignal 9 (Killed).\n", "rank-killed", "gpu04", "rank 3"),
    "ompi-nonzero": ("Open MPI 4.x help-orterun.txt", "-" * 55 + "\nPrimary job  terminated normally, but 1 process "
                     "returned\na non-zero exit code. Per user-direction, the job has been aborted.\n" + "-" * 55
                     + "\n" + _BAR + "mpirun detected that one or more processes exited with non-zero status, thus "
                     "causing\nthe job to be terminated. The first process to do so was:\n\n  Process name: "
                     "[[63422,1],3]\n  Exit code:    1\n" + _BAR, "rank-exited", None, "exit code 1"),
    "prterun-nonzero": ("PRRTE 3 help-prterun.txt", "prterun detected that one or more processes exited with non-zero "
                        "status,\nthus causing the job to be terminated. The first process to do so was:\n\n   Process "
                        "name: [prterun-gpu01-1234@1,3]\n   Exit code:    2\n", "rank-exited", None, "3"),
    "ompi-improper": ("Open MPI 1.x-4.x help-orterun.txt proc-exit-no-sync", "mpirun has exited due to process rank 2 "
                      "with PID 0 on\nnode gpu03 exiting improperly. There are three reasons this could occur:\n",
                      "rank-exited", "gpu03", "rank 2"),
    "ompi-exe": ("Open MPI 4.x help-orterun.txt", _BAR + "mpirun was unable to launch the specified application as it "
                 "could not access\nor execute an executable:\n\nExecutable: all_reduce_perf\nNode: gpu03\n\nwhile "
                 "attempting to start process rank 0.\n" + _BAR, "missing-executable", "gpu03", "all_reduce_perf"),
    "ompi-daemon-launch": ("Open MPI 4.x help-errmgr-base.txt", "ssh: connect to host gpu05 port 22: No route to host\n"
                           + _BAR + "ORTE was unable to reliably start one or more daemons.\nThis usually is caused "
                           "by:\n", "launcher-daemon-failed", "gpu05", ""),
    "ompi-daemon-failed": ("Open MPI 4.x help-errmgr-base.txt", "An ORTE daemon has unexpectedly failed after launch "
                           "and before\ncommunicating back to mpirun.\n", "launcher-daemon-failed", None, ""),
    "prte-daemon-failed": ("PRRTE help-errmgr-base.txt", "An PRTE daemon has unexpectedly failed after launch and "
                           "before\ncommunicating back to mpirun.\n", "launcher-daemon-failed", None, ""),
    "ompi-node-died": ("Open MPI 4.x help-errmgr-base.txt node-died", "ORTE has lost communication with its daemon "
                       "located on node:\n\n  hostname:  gpu06\n\nThis is usually due to either a failure of the TCP "
                       "network\n", "node-failure", "gpu06", ""),
    "hydra-exit-9": ("MPICH 3.x Hydra", _EQ + "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 123 "
                     "RUNNING AT gpu04\n=   EXIT CODE: 9\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE "
                     "BELOW CLEANUP MESSAGES\n" + _EQ + "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed "
                     "(signal 9)\n", "rank-killed", "gpu04", "SIGKILL"),
    "hydra-4-rank": ("MPICH 4.x Hydra", _EQ + "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 5 "
                     "PID 4242 RUNNING AT gpu07\n=   KILLED BY SIGNAL: 11 (Segmentation fault)\n" + _EQ,
                     "rank-killed", "gpu07", "rank 5"),
    "hydra-exit-1": ("MPICH 3.x Hydra", "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 77 RUNNING "
                     "AT gpu02\n=   EXIT CODE: 1\n", "rank-exited", "gpu02", "exit code 1"),
    # --- Slurm
    "srun-killed": ("Slurm srun", "srun: error: gpu04: task 3: Killed\n", "rank-killed", "gpu04", "task 3"),
    "srun-tasks": ("Slurm srun, a task range", "srun: error: gpu04: tasks 0-7: Segmentation fault (core dumped)\n",
                   "rank-killed", "gpu04", "SIGSEGV"),
    "srun-exit": ("Slurm srun", "srun: error: gpu04: task 3: Exited with exit code 1\n", "rank-exited", "gpu04",
                  "exit code 1"),
    "step-time-limit": ("Slurm slurmstepd", "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
                        "slurmstepd: error: *** STEP 1234.0 ON gpu04 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME "
                        "LIMIT ***\nsrun: error: gpu04: tasks 0-7: Terminated\n", "step-time-limit", None,
                        "logged by the step daemon on gpu04, the step's first node"),
    "job-time-limit": ("Slurm slurmstepd, hpc-unibe-ch docs", "slurmstepd: error: *** JOB 41239 ON fnode01 CANCELLED "
                       "AT 2016-11-30T11:22:57 DUE TO TIME LIMIT ***\n", "step-time-limit", None, "time limit"),
    "step-node-failure": ("Slurm slurmstepd", "slurmstepd: error: *** STEP 1234.0 ON gpu04 CANCELLED AT "
                          "2024-05-01T10:00:00 DUE TO NODE FAILURE ***\n", "node-failure", None, "sinfo -R"),
    "srun-node-failure": ("Slurm srun", "srun: error: Node failure on gpu04\nsrun: Job step aborted: Waiting up to 32 "
                          "seconds for job step to finish.\n", "node-failure", "gpu04", ""),
    "job-cancelled": ("Slurm slurmstepd (scancel)", "slurmstepd: error: *** JOB 1234 ON gpu04 CANCELLED AT "
                      "2024-05-01T10:00:00 ***\n", "job-cancelled", None, "names no node at fault"),
    "slurm-oom-21": ("Slurm 21.08+ task/cgroup", "slurmstepd: error: Detected 1 oom_kill event in StepId=1234.0. Some "
                     "of the step tasks have been OOM Killed.\nsrun: error: gpu04: task 3: Out Of Memory\n",
                     "rank-oom", "gpu04", "memory limit"),
    "slurm-oom-20": ("Slurm 17.11-20.11 task/cgroup", "slurmstepd-gpu05: error: Detected 1 oom-kill event(s) in step "
                     "1234.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory "
                     "handler.\n", "rank-oom", "gpu05", ""),
    "slurm-exceeded": ("Slurm jobacct, hpc-unibe-ch docs", "slurmstepd: error: Job 41176 exceeded memory limit "
                       "(3940736 > 2068480), being killed\n", "rank-oom", None, ""),
    "execve": ("Slurm slurmstepd", "slurmstepd: error: execve(): all_reduce_perf: No such file or directory\nsrun: "
               "error: gpu03: task 0: Exited with exit code 2\n", "missing-executable", "gpu03", "all_reduce_perf"),
    "execve-named": ("Slurm 23.x slurmstepd-<node> prefix", "slurmstepd-gpu03: error: execve(): ./train: Permission "
                     "denied\n", "missing-executable", "gpu03", "Permission denied"),
    "step-create": ("Slurm srun", "srun: error: Unable to create step for job 1234: Requested node configuration is "
                    "not available\n", "step-create-failed", None, "Requested node configuration"),
    "task-launch": ("Slurm srun", "srun: error: Task launch for StepId=1234.0 failed on node gpu09: Invalid job "
                    "credential\n", "launcher-daemon-failed", "gpu09", ""),
    # --- torch.distributed.elastic
    "torch-table-2x": ("torch 2.x errors/__init__.py; github.com/lzhxmu/CPPO/issues/6", _TABLE_2X, "rank-killed",
                       "gpu04.cluster", "rank 3"),
    "torch-table-signame": ("torch 2.11 (pytorch/pytorch#175254 adds the signal name)", _TABLE_2X.replace(
        "(pid: 14750)\n", "(pid: 14750) (SIGKILL)\n"), "rank-killed", "gpu04.cluster", "SIGKILL"),
    "torch-table-sigabrt": ("github.com/czp16/Bridge-LLM-reasoning/issues/1", _TABLE_2X.replace("-9 (pid", "-6 (pid")
                            .replace("Signal 9 (SIGKILL)", "Signal 6 (SIGABRT)"), "rank-killed", "gpu04.cluster",
                            "SIGABRT"),
    "torch-table-1.9": ("torch 1.9 layout (Root Cause: first, msg:, no host)", "*" * 40 + "\n            train.py "
                        "FAILED\n" + "=" * 40 + "\nRoot Cause:\n[0]:\n  time: 2021-07-07_14:18:24\n  rank: 2 "
                        "(local_rank: 2)\n  exitcode: -11 (pid: 4242)\n  error_file: <N/A>\n  msg: \"Signal 11 "
                        "(SIGSEGV) received by PID 4242\"\n" + "=" * 40 + "\nOther Failures:\n  <NO_OTHER_FAILURES>\n",
                        "rank-killed", None, "rank 2"),
    "torch-table-mangled": ("github.com/ZhehengJiangLancaster/AMVUR/issues/2 (a paste that lost its line breaks)",
                            "Root Cause (first observed failure) :\n[0]:\ntime\nhost\n2023-09-14 01:45:50\n"
                            "ding-X10DRG\nrank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>\n"
                            "traceback : signal 9 (SIGKILL) received by PID 36071\n", "rank-killed", None, "SIGKILL"),
    "torch-failed-line": ("torch 2.x api.py; github.com/xiaomi-research/time-r1/issues/9", "gpu04: E0813 "
                          "06:19:49.809000 161210 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] "
                          "failed (exitcode: -9) local_rank: 2 (pid: 161617) of binary: /opt/conda/bin/python3.11\n",
                          "rank-killed", "gpu04", "local_rank 2"),
    "torch-failed-1.x": ("torch 1.13 api.py; github.com/hpcaitech/ColossalAI/issues/3514", "WARNING:torch.distributed."
                         "elastic.multiprocessing.api:Sending process 812914 closing signal SIGTERM\nERROR:torch."
                         "distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of "
                         "binary: /data/envs/bin/python\n", "rank-killed", None, "SIGKILL"),
    "torch-failed-exit1": ("torch 1.13; github.com/pytorch/pytorch/issues/123808", "ERROR:torch.distributed.elastic."
                           "multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 17966) of binary: /home/j/"
                           "bin/python\n", "rank-exited", None, "exit code 1"),
    "torch-heartbeat": ("torch dynamic_rendezvous.py", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
                        "\nThe node 'gpu04_2211_0' has failed to send a keep-alive heartbeat to the rendezvous "
                        "'job42' due to an error of type RendezvousTimeoutError.\n", "rendezvous-node-lost", "gpu04",
                        ""),
    "torch-rdzv-timeout": ("torch dynamic_rendezvous.py", "torch.distributed.elastic.rendezvous.api."
                           "RendezvousTimeoutError\n", "rendezvous-incomplete", None, ""),
    "torch-port-in-use": ("torch 2.x TCPStore", "torch.distributed.DistNetworkError: The server socket has failed to "
                          "listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, "
                          "message: address already in use\n", "port-in-use", None, "EADDRINUSE"),
    # --- the kernel's OOM killer, with the host its collector or syslog names
    "kernel-oom-syslog": ("Linux 4.19+ mm/oom_kill.c via syslog", "Jan 12 10:00:01 gpu04 kernel: Out of memory: "
                          "Killed process 123 (python) total-vm:81234560kB, anon-rss:70012345kB\n", "rank-oom",
                          "gpu04", "python (pid 123)"),
    "kernel-oom-old": ("Linux < 4.19 mm/oom_kill.c via pdsh", "gpu05: [1234.5] Out of memory: Kill process 123 "
                       "(python) score 901 or sacrifice child\ngpu06: [1234.5] ok\n", "rank-oom", "gpu05", ""),
    "kernel-memcg": ("Linux 4.19+ oom-kill summary", "gpu04: [12345.678] oom-kill:constraint=CONSTRAINT_MEMCG,"
                     "nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/job_1234,task_memcg=/slurm/"
                     "uid_1000/job_1234/step_0,task=python,pid=123,uid=1000\ngpu05: ok\n", "rank-oom", "gpu04",
                     "job's memory limit"),
    # --- the dead rank comes first; the errors it causes elsewhere follow
    "killed-then-nccl": ("srun + NCCL + torch watchdog", _NCCL_ECHO + "srun: error: gpu04: task 3: Killed\n",
                         "rank-killed", "gpu04", "consequence"),
    "table-then-gloo": ("torch table + gloo", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
                        "Connection closed by peer [10.0.0.4]:14788\n" + _TABLE_2X, "rank-killed", "gpu04.cluster",
                        ""),
    "ompi-then-refused": ("mpirun + NCCL connect refused", "gpu01:1:2 [0] NCCL WARN socketStartConnect: Connect to "
                          "10.0.0.4<45678> failed : Connection refused\nmpirun noticed that process rank 3 with PID 9 "
                          "on node gpu04 exited on signal 9 (Killed).\n", "rank-killed", "gpu04", ""),
}


@pytest.mark.parametrize(("source", "text", "cause_id", "host", "detail"), CASES.values(), ids=list(CASES))
def test_each_launcher_wording_names_the_dead_rank_and_its_host(source: str, text: str, cause_id: str,
                                                                host: str | None, detail: str) -> None:
    result = explain([("job.log", text)])
    assert result.failed, source
    cause = result.causes[0]
    assert cause.id == cause_id, [c.id for c in result.causes]
    if host:
        assert host in cause.hosts, cause.hosts
    assert detail.lower() in (cause.title + " " + cause.detail).lower(), cause.title + " | " + cause.detail
    assert cause.evidence and all(e.text for e in cause.evidence)
    assert "mtu-blackhole" not in [c.id for c in result.causes]


HEALTHY = {
    # Open MPI prints nothing when every rank returns 0; its summary line alone is no failure.
    "ompi-normal": "Primary job terminated normally\nAvg bus bandwidth    : 22.1\n",
    "srun-exit-0": "srun: error: gpu04: task 3: Exited with exit code 0\n",
    "torch-done": ("[2024-01-01 10:00:00,000] torch.distributed.elastic.agent.server.api: [INFO] [default] worker "
                   "group successfully finished. Waiting 300 seconds for other agents to finish.\n"
                   "[2024-01-01 10:00:00,100] torch.distributed.elastic.agent.server.api: [INFO] Local worker group "
                   "finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish\n"
                   "[2024-01-01 10:00:01,000] torch.distributed.elastic.agent.server.api: [INFO] Done waiting for "
                   "other agents. Elapsed: 0.5 seconds\n"),
    "hydra-code-0": "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n",
    "oom-score-adj": "gpu04: python invoked oom_score_adj update\n",
}


@pytest.mark.parametrize("text", HEALTHY.values(), ids=list(HEALTHY))
def test_healthy_launcher_output_names_nothing(text: str) -> None:
    result = explain([("job.log", text)])
    assert not result.failed, [c.id for c in result.causes]


def test_the_dead_rank_is_named_through_the_inventory() -> None:
    """An inventory that knows gpu04 by its data address maps the killed rank's host to it."""
    from provisioner.explain.hosts import map_hosts

    result = explain([("job.log", _NCCL_ECHO + "srun: error: gpu04: task 3: Killed\n")])
    first = result.causes[0]
    mapping = map_hosts(first.hosts, [("gpu04.example", "10.1.0.4", {"data_ip": "10.0.0.4"})])
    assert mapping == {"gpu04": "gpu04.example"}
    assert [c.id for c in result.causes][1:] and first.score > max(c.score for c in result.causes[1:])
