"""The causes `explain` knows: one registry of rules, each a function from the logs to zero or more
Causes with evidence, kept in one module per class (rules_socket, rules_container, rules_bootstrap,
rules_verbs, rules_provider, rules_events, rules_cuda, rules_cumem, rules_shm, rules_job, rules_nccl_tests, rules_proxy,
rules_ras, rules_torch, rules_desync, rules_gloo, rules_launch, rules_elastic, rules_gdr, rules_rocm,
rules_nvlink, rules_store, rules_plugins, rules_topo, rules_symmetric, rules_versions, rules_transport,
rules_pcie, rules_enroot, rules_pmix, rules_stepd; name lookups in lookups.py, the two ends of one link in
completion_ends.py, the failing run of a log of several nccl-tests runs in nccl_runs.py).

Scores order the answer: a cause that stops a job by itself (no interface, duplicate GPU, completion
errors, unreachable peer, a device fault) ranks above its symptoms (a watchdog timeout, a dead peer, a
run without its footer). A kernel fault and a network error that one process logged rank in the order it logged
them (rules_cuda.in_log_order). Every cause named is a failure or a slow path: a log that names none is healthy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from provisioner.explain import (
    rules_bootstrap,
    rules_container,
    rules_cuda,
    rules_cumem,
    rules_desync,
    rules_elastic,
    rules_enroot,
    rules_events,
    rules_gdr,
    rules_gloo,
    rules_job,
    rules_launch,
    rules_nccl_tests,
    rules_nvlink,
    rules_pcie,
    rules_plugins,
    rules_pmix,
    rules_provider,
    rules_proxy,
    rules_ras,
    rules_rocm,
    rules_shm,
    rules_socket,
    rules_stepd,
    rules_store,
    rules_symmetric,
    rules_topo,
    rules_torch,
    rules_transport,
    rules_verbs,
    rules_versions,
    smoke,
)
from provisioner.explain.evidence import evidence
from provisioner.explain.hosts import redacted
from provisioner.explain.logs import Log, read_log
from provisioner.explain.model import Cause, Explanation, NetworkUse
from provisioner.parsers._text import unique

RULES: list[Callable[[list[Log]], list[Cause]]] = [
    rules_socket.no_interface, rules_enroot.container_start, rules_container.bridge_network,
    rules_container.unopened_devices,
    rules_bootstrap.oob_device,
    rules_bootstrap.bootstrap_root,
    rules_bootstrap.bootstrap_accept, rules_job.duplicate_gpu, rules_shm.shared_memory, rules_verbs.firmware_fault,
    rules_verbs.resource_failures,
    rules_verbs.incompatible_devices, rules_verbs.completion_errors, rules_provider.provider_completion_errors,
    rules_events.port_down,
    rules_events.queue_errors, rules_cuda.gpu_causes, rules_cumem.cumem, rules_symmetric.symmetric,
    rules_nvlink.nvlink_setup,
    rules_topo.topology_files,
    rules_socket.message_truncated,
    rules_socket.unreachable_peers, rules_socket.address_family,
    rules_socket.suspect_interfaces, rules_socket.socket_fallback, rules_plugins.plugins,
    rules_versions.version_mismatch,
    rules_desync.desync, rules_torch.watchdog, rules_torch.watchdog_hung,
    rules_torch.rendezvous_wait, rules_store.store_wait, rules_nccl_tests.nccl_tests_results, rules_job.mtu_blackhole,
    rules_gloo.stalled_transfers, rules_gloo.loopback_fallback,
    rules_gdr.gpudirect_disabled, rules_transport.slower_host, rules_rocm.rccl_settings, rules_job.dead_peer,
    rules_ras.ras,
    rules_proxy.proxy_failures,
    rules_job.crashes,
    rules_launch.launcher_failures, rules_pmix.pmix_wireup, rules_pmix.pmix_library, rules_elastic.exit_barrier,
    rules_stepd.memory_error, rules_stepd.consequences,
]
# A rank the launcher or scheduler saw die, or a step whose MPI wire-up failed before NCCL ran (its ranks hung or
# were killed in start-up), explains what the generic crash rule and the stalled-path rules would otherwise blame:
# with one, those are dropped.
DEATHS = rules_launch.DEATHS | {rules_pmix.ID}
SUPERSEDES = {"process-crashed", "mtu-blackhole"}
# A host named as the one on TCP among RDMA hosts says better what the per-log "sockets between nodes" says.
NARROWED = {"host-slower-transport": "ib-not-used",
            # A task whose container never started exited for that reason, not by its program's error.
            "container-start-failed": "rank-exited",
            # MPI_Init failing because its PMIx exchange between the nodes did says more than MPI_Init failing.
            rules_pmix.ID: "mpi-init-failed",
            # Traffic that stopped where Slurm requeued the job stopped because the run was ended there.
            rules_stepd.REQUEUED: "mtu-blackhole"}
# Rules that only summarise what others explain better: used when nothing else names a failure.
FALLBACK: list[Callable[[list[Log]], list[Cause]]] = [rules_job.nccl_error, rules_bootstrap.init_unfinished]


# The lines that show the network: NCCL's choice, each transport's list, and a plugin's own banner (GPUDirect-TCPX's
# `NET/GPUDirectTCPX ver. 3.1.8.`, gIB's `Initializing gIB v1.0.2`, TCPXO's `Initializing network FasTrak, version:`).
_NETWORK_LINES = re.compile(r"Using (?:internal )?network|NET/\w+\s*:\s*Using|NET/IB\s*: No device|NET/\w+ ver\. |"
                            r"NET/\w+\b.*Initializing (?:network )?\w+(?:, version:| v[0-9])", re.I)


def network_use(log: Log) -> NetworkUse | None:
    nccl = log.nccl
    if nccl is None:
        return None
    lines = [line for line, _ in log.grep(_NETWORK_LINES)]
    plugin = " ".join(p for p in (nccl.net_plugin, nccl.net_plugin_version) if p) or None
    return NetworkUse(
        file=log.name, framework="nccl", network=nccl.network, plugin=plugin, devices=nccl.ib_devices,
        interfaces=unique(nccl.socket_interfaces + nccl.bootstrap), control=nccl.ctrl_interfaces,
        nccl_version=nccl.nccl_version,
        # A poster's placeholder for a host (`...-48`, `xxx`) names none, here as in the causes (_unnamed).
        hosts=[h for h in nccl.hosts if not redacted(h)], provider=nccl.ofi_provider, evidence=evidence(lines, limit=4),
    )


def _unnamed(cause: Cause) -> Cause:
    """A cause without the placeholders a poster wrote for a host's name or address (`...-48`, `xxx`,
    `<hostname>`): they name no host to look at, so `where` leaves them out and the text says the name was
    redacted. The evidence lines keep them as written."""
    hidden = [h for h in cause.hosts + cause.addresses if redacted(h)]
    if not hidden:
        return cause
    text = {"title": cause.title, "detail": cause.detail}
    for name in sorted(hidden, key=len, reverse=True):
        token = re.compile(rf"(?<![\w.*<>-]){re.escape(name)}(?![\w*<>-]|\.\w)")
        text = {key: token.sub("a host whose name the log redacts", value) for key, value in text.items()}
    what = "a host name" if len(hidden) == 1 else "host names"
    note = f" The log redacts {what} ({', '.join(hidden)}): find the host from the job's allocation."
    return cause.model_copy(update={
        "title": text["title"], "detail": text["detail"] + note,
        "hosts": [h for h in cause.hosts if not redacted(h)],
        "addresses": [a for a in cause.addresses if not redacted(a)]})


def explain(logs: list[tuple[str, str]], aliases: Mapping[str, str] | None = None) -> Explanation:
    """Causes, most likely first, for the (name, text) logs of one job (`fabnet smoke --json` output
    included: its findings are causes and its ranks' output is read as logs). `aliases`: {name or
    address in the logs: host}, where the caller knows them (an inventory), so a host's name and its
    address count as one node."""
    texts: list[tuple[str, str, str | None]] = []
    causes: list[Cause] = []
    for name, text in logs:
        if (data := smoke.load(text)) is not None:
            causes += smoke.causes(name, text, data)
            texts += smoke.rank_outputs(name, data)
        else:
            texts.append((name, text, None))
    read = [read_log(name, text, host) for name, text, host in texts]
    for log in read:
        log.aliases = dict(aliases or {})
    for rule in RULES:
        causes += rule(read)
    if any(c.id in DEATHS for c in causes):
        causes = [c for c in causes if c.id not in SUPERSEDES]
    narrowed = {NARROWED[c.id] for c in causes if c.id in NARROWED}
    causes = [c for c in causes if c.id not in narrowed]
    # The launcher's verdicts after a failed wire-up are its consequence: ranked under it.
    causes = rules_pmix.lead(causes, [(name, text) for name, text, _ in texts])
    # A hang with nothing else to explain it, on PCIe peer paths: read once every other rule has spoken.
    causes = rules_pcie.defer(causes + rules_pcie.p2p_hang(read, causes))
    # A failed or requeued job's verdict follows a cause it does not name: the summaries may still be the best one.
    if all(c.id in rules_stepd.CONSEQUENCES for c in causes):
        for rule in FALLBACK:
            causes += rule(read)
    causes = rules_ras.fold(rules_proxy.fold(causes), read)
    causes = rules_cuda.in_log_order(causes, read)
    causes = [_unnamed(c) for c in causes]
    # Slurm's reason beside the verdict it gave; a failed or requeued job's verdict under what it follows.
    causes = rules_stepd.follow(rules_stepd.reasons(causes))
    causes.sort(key=lambda c: -c.score)
    networks = [use for log in read if (use := network_use(log)) is not None]
    return Explanation(files=[name for name, _ in logs], networks=networks, causes=causes)
