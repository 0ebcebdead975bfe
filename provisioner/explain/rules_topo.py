"""What NCCL says about the topology and graph files an operator gives it, and a graph search that leaves a rank
without a NIC: job settings and node setup, not the links.

Wording read (NCCL's graph code): `Could not open XML topology file F : why` (a WARN until 2.29, an INFO in 2.30;
either way NCCL goes on with the topology it detects itself), `Could not open XML graph file F : why` (a WARN that
stops the communicator), the XML reader's `XML Parse ...` / `XML Mismatch` / `XML Topology has wrong version` lines,
and `Could not find NIC for rank N in NVLS graph` (2.18 on).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_OPEN = re.compile(r"Could not open XML (?P<kind>topology|graph) file (?P<file>\S+) : (?P<why>.+?)\s*$")
_PARSE = re.compile(r"XML Parse(?: error)? : .+|XML Mismatch : .+|XML Topology has wrong version .+")
_NVLS_NIC = re.compile(r"Could not find NIC for rank (?P<rank>[0-9]+) in NVLS graph")


def _files(logs: list[Log]) -> list[Cause]:
    causes: list[Cause] = []
    opened = grep(logs, _OPEN)
    for kind in ("graph", "topology"):
        found = [(line, m) for line, m in opened if m["kind"] == kind]
        if not found:
            continue
        lines = [line for line, _ in found]
        files = unique([m["file"] for _, m in found])
        why = unique([m["why"] for _, m in found])[0]
        setting = "NCCL_GRAPH_FILE" if kind == "graph" else "NCCL_TOPO_FILE"
        stops = kind == "graph"
        causes.append(Cause(
            id="topo-file-unreadable",
            title=f"{setting}={files[0]} could not be read ({why})"
                  + (": the communicator was not created" if stops else ": NCCL ignored it"),
            detail=(f"On {', '.join(hosts(lines)) or 'a host'} the {kind} file {setting} names is not there or not "
                    "readable inside the job's environment (a path of the host not mounted in the container, a "
                    "file copied to one node only). ")
            + ("NCCL stops on a graph file it cannot read." if stops else
               "NCCL then detects the topology itself, without the file's GPU/NIC placement (on virtual machines "
               "that is often a wrong one: collectives run, slower)."),
            fix=f"Make {setting} name a file that exists on every node inside the job (mount it into the "
                "container, same path everywhere), or unset it. NCCL_TOPO_DUMP_FILE=/tmp/topo.xml writes what NCCL "
                "detected, to compare.",
            score=80 if stops else 40, hosts=hosts(lines), settings=[setting], evidence=evidence(lines),
        ))
    parse = [line for line, _ in grep(logs, _PARSE)]
    if parse:
        causes.append(Cause(
            id="topo-file-invalid", title="NCCL could not read the topology or graph XML it was given",
            detail=f"On {', '.join(hosts(parse)) or 'a host'} NCCL's XML reader rejected the file "
                   "(malformed, truncated, or written for another NCCL release), and the communicator was not "
                   "created.",
            fix="Check the files NCCL_TOPO_FILE and NCCL_GRAPH_FILE name (`xmllint --noout FILE`); regenerate "
                "them with this NCCL release (NCCL_TOPO_DUMP_FILE / NCCL_GRAPH_DUMP_FILE on a healthy node), or "
                "unset them to let NCCL detect the topology.",
            score=82, hosts=hosts(parse), settings=["NCCL_TOPO_FILE", "NCCL_GRAPH_FILE"], evidence=evidence(parse),
        ))
    return causes


def _nvls_nic(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _NVLS_NIC)
    if not found:
        return []
    lines = [line for line, _ in found]
    ranks = unique([m["rank"] for _, m in found])
    return [Cause(
        id="nvls-no-nic", title=f"NVLink SHARP between nodes found no NIC for rank {', '.join(ranks[:4])}",
        detail=f"On {', '.join(hosts(lines)) or 'a host'} NCCL's NVLS graph (NVLink SHARP inside the node, the "
               "network between nodes) gave this rank's GPU no NIC to send through, so the communicator was not "
               "created. The node showed NCCL fewer usable NICs than its GPUs need, or a different set than the "
               "other nodes.",
        fix="Compare the NICs per node: `ibv_devinfo` (every HCA present, port ACTIVE), NCCL_IB_HCA not leaving "
            "some out, the same NCCL_TOPO_FILE (or none) everywhere, GPUs per node alike. NCCL_NVLS_ENABLE=0 runs "
            "without NVLink SHARP to confirm.",
        score=80, hosts=hosts(lines), settings=["NCCL_IB_HCA", "NCCL_NVLS_ENABLE"], evidence=evidence(lines),
    )]


def topology_files(logs: list[Log]) -> list[Cause]:
    return _files(logs) + _nvls_nic(logs)
