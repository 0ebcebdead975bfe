"""`explain` on field logs printed behind a framework's own prefixes (tests/samples/logs/, sources in
tests/samples/INDEX.md): vLLM's worker and logger prefixes, glog's. The cause reads as in the bare log, and
no host is made of a prefix's time, logger or file name."""

from __future__ import annotations

from tests.unit.explain._field import table

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix/settings hold)
CASES: dict[str, tuple[str, str, str]] = {
    # vLLM 0.9's `(VllmWorker rank=3 pid=406) ERROR 07-23 19:34:51 [multiproc_executor.py:487] ` on every line:
    # the time before the bracket was read as NCCL's `host:pid:tid [dev]`, naming a host `19`.
    "vllm-worker-rank-unhandled-cuda-1.txt": (
        "cuda-failure", "RuntimeError: NCCL error: unhandled cuda error", "a CUDA call failed: unhandled cuda error"),
    # torchrun's warnings behind glog's `W0722 15:17:50.704000 140269336518656 torch/distributed/run.py:757] `.
    "torchrun-glog-c10d-client-timeout-5.txt": (
        "peer-unreachable", "[c10d] The client socket has timed out after 60s",
        "cannot reach the rendezvous store"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "vllm-worker-rank-unhandled-cuda-1.txt": [],
    "torchrun-glog-c10d-client-timeout-5.txt": [],
}


# No host is made of a prefix: each log names exactly the hosts below.
test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS, evidence_starts=True)
