"""What stops NCCL while it lays its paths over NVLink before any byte moves: multi-node NVLink (MNNVL, GB200
NVL racks) that the node offers but IMEX does not serve, and rings the ranks built differently because they do
not see one topology. Both are node or job setup, not the network's links, and are named so.

Wording read (NCCL's init and graph code, by release): MNNVL forced on with `NCCL_MNNVL_ENABLE=1` where it is
not there, `MNNVL is not supported on this system` (2.21 to 2.24); the self-test of fabric memory,
`MNNVL (cliqueSize N) is available but not supported on this system. Check the IMEX configuration.` (2.25, 2.26),
then `... is available but not working on this system. Check the IMEX channel configuration
(/dev/nvidia-caps-imex-channels). ...` when fabric memory cannot even be allocated (the process has no IMEX
channel) and `... Check the IMEX configuration (nvidia-imex-ctl -N). ...` when it cannot be exported or imported
(the IMEX daemons) (2.27 on). The ring check, the same words in every release:
`Error : ring N does not loop back to start (A != B)` and `Error : ring N does not contain rank R`. NVLink SHARP
forced on where ranks share a GPU: `NCCL_NVLS_ENABLE has been set to "1" and communicator has multiple ranks using
the same NVML device. ...` (2.30 on).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_MNNVL = re.compile(r"MNNVL (?:\(cliqueSize (?P<size>[0-9]+)\) )?is (?:available but )?not (?:supported|working) "
                    r"on this system(?:\.\s*Check the IMEX (?P<channel>channel )?configuration)?")
_RING = re.compile(r"Error : ring (?P<ring>[0-9]+) does not (?:loop back to start \((?P<got>[0-9]+) != "
                   r"(?P<start>[0-9]+)\)|contain rank (?P<missing>[0-9]+))")

_MNNVL_FIX = {
    "channel": "The process could not allocate fabric memory: it has no IMEX channel. On the host named, "
               "`ls /dev/nvidia-caps-imex-channels/` must show `channel0` inside the job's container as on the host "
               "(the driver creates it with the nvidia module parameter NVreg_CreateImexChannel0=1, or the GPU "
               "operator's ComputeDomain hands it to the pod); `systemctl status nvidia-imex` running. ",
    "daemon": "The fabric memory could not be shared through IMEX. On the host named: `systemctl status "
              "nvidia-imex`, `nvidia-imex-ctl -N` (every node of the NVLink domain Connected), the same node list "
              "(nodes_config.cfg) and IMEX version on every node, and `nvidia-smi -q | grep -A4 Fabric` (State "
              "Completed, Status Success, one ClusterUUID/CliqueId across the nodes). ",
    "forced": "NCCL_MNNVL_ENABLE=1 asks for multi-node NVLink and the nodes do not offer it: check that they are in "
              "one NVLink domain (`nvidia-smi -q | grep -A4 Fabric`: State Completed, the same ClusterUUID and "
              "CliqueId), that the fabric manager and `nvidia-imex` run on each, or leave NCCL_MNNVL_ENABLE unset. ",
}


def _mnnvl(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _MNNVL)
    if not found:
        return []
    m = found[0][1]
    kind = ("forced" if "available" not in m[0] else "channel" if m["channel"]
            else "daemon" if "working" in m[0] else "channel-or-daemon")
    lines = [line for line, _ in found]
    where = unique([h for line in lines if (h := line.host)])
    size = f" (an NVLink domain of {m['size']} GPUs)" if m["size"] else ""
    fix = (_MNNVL_FIX["channel"] + _MNNVL_FIX["daemon"] if kind == "channel-or-daemon" else _MNNVL_FIX[kind])
    return [Cause(
        id="mnnvl-imex", title=f"multi-node NVLink{size} could not be used: IMEX "
        + ("channel missing" if kind == "channel" else "service not serving" if kind == "daemon"
           else "channel or service" if kind == "channel-or-daemon" else "not set up (MNNVL forced on)"),
        detail=f"NCCL found the node in a multi-node NVLink domain{size} on {', '.join(where) or 'a host'} and its "
               "test of fabric memory failed, so it stopped instead of using the NVLink between trays. The NICs "
               "are not the problem: the NVLink domain's memory sharing (IMEX) is.",
        fix=fix + "NCCL_MNNVL_ENABLE=0 only to confirm: the job then runs between trays over the NICs, much slower.",
        score=88, hosts=where, evidence=evidence(lines), settings=["NCCL_MNNVL_ENABLE"],
    )]


def _rings(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _RING)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = unique([h for line in lines if (h := line.host)])
    rings = unique([m["ring"] for _, m in found])
    return [Cause(
        id="topology-mismatch", title=f"the ranks built different rings (ring {', '.join(rings[:3])}): they do not "
        "see one topology",
        detail=f"NCCL's check of the rings it computed failed on {', '.join(where) or 'a host'}: each rank builds "
               "the rings from its own view of the GPUs, NICs and links, and here the views did not agree, so "
               "the communicator was not created (an internal error to the framework). Not a broken link.",
        fix="Compare across the job's nodes what the topology is computed from: one NCCL library on every rank "
            "(the `NCCL version` line); NCCL_TOPO_FILE and NCCL_GRAPH_FILE unset or one file that fits this "
            "hardware on every node; the same NCCL_* settings on every rank (NCCL_P2P_DISABLE/NCCL_P2P_LEVEL, "
            "NCCL_IB_HCA, NCCL_CROSS_NIC, NCCL_ALGO, NCCL_HOSTID); and the same hardware seen on each node "
            "(`nvidia-smi topo -m`, every GPU and NIC present, `nvidia-smi nvlink -s` with no link down). "
            "NCCL_TOPO_DUMP_FILE=/tmp/topo.xml on each node shows what it saw; NCCL before 2.20 could read an "
            "unset PCI link speed differently from rank to rank (fixed in 2.20).",
        score=80, hosts=where, evidence=evidence(lines),
        settings=["NCCL_TOPO_FILE", "NCCL_GRAPH_FILE"],
    )]

_NVLS_SHARED = re.compile(r"NCCL_NVLS_ENABLE has been set to \"?1\"? and communicator has multiple ranks using the "
                          r"same NVML device")


def _nvls_shared(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _NVLS_SHARED)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = unique([h for line in lines if (h := line.host)])
    return [Cause(
        id="nvls-forced-shared-gpu", title="NVLink SHARP forced on (NCCL_NVLS_ENABLE=1) while ranks share a GPU",
        detail=f"On {', '.join(where) or 'a host'} several ranks of one communicator use the same GPU, which NVLink "
               "SHARP (NVLS) cannot serve; with NCCL_NVLS_ENABLE=1 NCCL refuses instead of running without it. "
               "A job setting, not the fabric.",
        fix="Leave NCCL_NVLS_ENABLE unset (NCCL then uses NVLS only where it can) or give every rank its own GPU "
            "(ranks per node against GPUs per node, CUDA_VISIBLE_DEVICES per rank, MPS or MIG sharing).",
        score=84, hosts=where, evidence=evidence(lines), settings=["NCCL_NVLS_ENABLE"],
    )]


def nvlink_setup(logs: list[Log]) -> list[Cause]:
    return _mnnvl(logs) + _nvls_shared(logs) + _rings(logs)
