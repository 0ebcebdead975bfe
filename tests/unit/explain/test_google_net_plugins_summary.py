"""explain's network summary for Google Cloud's plugins: the plugin and its version, the data NICs as interfaces and
GPUDirect-TCPX's control interface apart from them. Lines as in tests/unit/parsers/test_google_net_plugins.py (real
TCPX and gIB wordings, the TCPX interface lists built from the plugin's format strings in
google/nccl-plugin-gpudirecttcpx src/connect.cc)."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.parsers.test_google_net_plugins import _GIB, _TCPX


def test_tcpx_summary_keeps_the_control_interface_out_of_the_data_path() -> None:
    (use,) = explain([("tcpx.log", _TCPX)]).networks
    assert use.network == "GPUDirectTCPX_v7" and use.plugin == "GPUDirectTCPX 3.1.8"
    assert use.control == ["eth0:10.128.0.5"]
    assert "eth0:10.128.0.5" not in use.interfaces and "eth1:192.168.0.2" in use.interfaces, use.interfaces


def test_gib_summary_names_its_devices() -> None:
    (use,) = explain([("gib.log", _GIB)]).networks
    assert use.plugin == "gIB 1.0.2" and use.devices == ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"]
    assert use.interfaces == [] and use.control == []
