"""Google Cloud's NCCL net plugins: which one NCCL loaded, its version, and its control interface kept apart from
the data NICs.

Real lines: TCPXO's banner and network (tests/samples/nccl-debug-tcpxo-fastrak-network-1.txt, source in
tests/samples/INDEX.md); GPUDirect-TCPX's `Using network GPUDirectTCPX_v7` and
`NET/GPUDirectTCPX : GPUDirectTCPX enable: 1` (elideng-sg/hypercomputer-internode-deepdive
assets/lab-18/after_tcpx_transport.txt) and its `NET/GPUDirectTCPX ver. 3.1.8.` (SkyPilot's GPUDirect-TCPX
example README); gIB's `Using network gIB` and `NET/gIB : Initializing gIB v1.0.2` (Google Cloud's "Collect and
understand NCCL/gIB logs" page). Built by hand from the plugin's format strings (google/nccl-plugin-gpudirecttcpx
src/connect.cc): TCPX's `Using ctrl socket on %s, %s`, `Using ctrl [ctrl]%s:%s` and `Using [%d]%s:%s` lines; gIB's
device list in NET/IB's own wording, which gIB (NCCL's IB transport) is taken to keep: no public log shows it."""

from __future__ import annotations

from provisioner.parsers.nccl_debug import parse_nccl_debug
from tests.unit.parsers._samples import read

_TCPX = """\
a3-0:100:100 [0] NCCL INFO NET/GPUDirectTCPX ver. 3.1.8.
a3-0:100:100 [0] NCCL INFO NET/GPUDirectTCPX : GPUDirectTCPX enable: 1
a3-0:100:100 [0] NCCL INFO NET/GPUDirectTCPX : Using ctrl socket on eth0, 10.128.0.5<0>
a3-0:100:100 [0] NCCL INFO NET/GPUDirectTCPX : Using ctrl [ctrl]eth0:10.128.0.5<0>
a3-0:100:100 [0] NCCL INFO NET/GPUDirectTCPX : Using [0]eth1:192.168.0.2<0> [1]eth2:192.168.1.2<0> \
[2]eth3:192.168.2.2<0> [3]eth4:192.168.3.2<0>
a3-0:100:100 [0] NCCL INFO Using network GPUDirectTCPX_v7
"""

_GIB = """\
a3ultra-vm-0:606:642 [6] NCCL INFO NET/gIB : Initializing gIB v1.0.2
a3ultra-vm-0:606:642 [6] NCCL INFO NET/gIB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.128.0.9<0>
a3ultra-vm-0:606:642 [6] NCCL INFO Using network gIB
"""


def test_tcpx_control_interface_is_not_a_data_nic() -> None:
    nccl = parse_nccl_debug(_TCPX)
    assert nccl.network == "GPUDirectTCPX_v7"
    assert (nccl.net_plugin, nccl.net_plugin_version) == ("GPUDirectTCPX", "3.1.8")
    assert nccl.ctrl_interfaces == ["eth0:10.128.0.5"], nccl.ctrl_interfaces
    assert nccl.socket_interfaces == ["eth1:192.168.0.2", "eth2:192.168.1.2", "eth3:192.168.2.2",
                                      "eth4:192.168.3.2"], nccl.socket_interfaces
    assert nccl.net_transports == ["GPUDirectTCPX"] and not nccl.suspect_interfaces


def test_tcpx_default_control_sockets_name_no_interface() -> None:
    lines = [line for line in _TCPX.splitlines(keepends=True) if "[ctrl]" not in line]
    nccl = parse_nccl_debug("".join(lines).replace("Using ctrl socket on eth0, 10.128.0.5<0>",
                                                   "Using default ctrl sockets"))
    assert nccl.ctrl_interfaces == [] and len(nccl.socket_interfaces) == 4


def test_a_control_interface_on_a_container_bridge_is_suspect() -> None:
    nccl = parse_nccl_debug(_TCPX.replace("eth0, 10.128.0.5", "docker0, 172.17.0.1")
                            .replace("[ctrl]eth0:10.128.0.5", "[ctrl]docker0:172.17.0.1"))
    assert [s.interface for s in nccl.suspect_interfaces] == ["docker0"], nccl.suspect_interfaces


def test_gib_lists_rdma_devices_and_its_oob_interface() -> None:
    nccl = parse_nccl_debug(_GIB)
    assert nccl.network == "gIB" and (nccl.net_plugin, nccl.net_plugin_version) == ("gIB", "1.0.2")
    assert nccl.ib_devices == ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"], nccl.ib_devices
    assert nccl.oob_interfaces == ["eth0:10.128.0.9"] and nccl.socket_interfaces == []
    assert nccl.ib_relaxed_ordering is True


def test_tcpxo_names_fastrak_and_its_version() -> None:
    nccl = parse_nccl_debug(read("nccl-debug-tcpxo-fastrak-network-1.txt"))
    assert nccl.network == "FasTrak"
    assert (nccl.net_plugin, nccl.net_plugin_version) == ("FasTrak", "1.0.17")
    assert nccl.hosts == ["tcpxo-wb-0", "tcpxo-wb-1"]
