"""`explain` on the topology and graph files NCCL is given and on an NVLS graph without a NIC. No field log was
found for these: the lines are built from NCCL's source wording, in each release's form."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import words

_H = "gpu-a:1234:1300 [0] "


@pytest.mark.parametrize(("line", "want", "holds"), [
    # NCCL_TOPO_FILE missing: a WARN to 2.29, an INFO in 2.30; NCCL goes on with what it detects (a slow path)
    ("graph/xml.cc:311 NCCL WARN Could not open XML topology file /opt/ndv4-topo.xml : No such file or directory",
     ("topo-file-unreadable", 40), "NCCL_TOPO_FILE=/opt/ndv4-topo.xml"),
    ("NCCL INFO Could not open XML topology file /opt/ndv4-topo.xml : Permission denied",
     ("topo-file-unreadable", 40), "NCCL ignored it"),
    # NCCL_GRAPH_FILE missing stops the communicator
    ("graph/xml.cc:1257 NCCL WARN Could not open XML graph file /opt/graph.xml : No such file or directory",
     ("topo-file-unreadable", 80), "NCCL_GRAPH_FILE=/opt/graph.xml"),
    # the XML reader's refusals
    ("graph/xml.cc:149 NCCL WARN XML Parse error : expecting '<', got 'x'", ("topo-file-invalid", 82), "xmllint"),
    ("graph/xml.cc:219 NCCL WARN XML Mismatch : system / gpu", ("topo-file-invalid", 82), "NCCL_TOPO_DUMP_FILE"),
    ("graph/xml.cc:394 NCCL WARN XML Topology has wrong version 1, 2 needed", ("topo-file-invalid", 82),
     "another NCCL release"),
    # 2.18 on
    ("graph/search.cc:1393 NCCL WARN Could not find NIC for rank 3 in NVLS graph", ("nvls-no-nic", 80),
     "NCCL_NVLS_ENABLE=0"),
])
def test_each_topology_file_wording(line: str, want: tuple[str, int], holds: str) -> None:
    top = explain([("a.log", _H + line + "\n")]).causes[0]
    assert (top.id, top.score) == want and top.hosts == ["gpu-a"], (top.id, top.score, top.hosts)
    assert holds in words(top), words(top)
