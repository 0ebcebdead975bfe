"""How the network NCCL chose was set up, from real logs where they show it and otherwise from the plugin's and NCCL's
own format strings (each test names the release and source file): aws-ofi-nccl's libfabric provider, NCCL's socket
threads."""

from __future__ import annotations

from provisioner.parsers.nccl_debug import parse_nccl_debug

from ._samples import SAMPLES

_P = "gpu01:2001:2101 [0] NCCL INFO "


def _sample(name: str) -> str:
    return (SAMPLES / "logs" / name).read_text()


def test_ofi_provider_is_recorded_with_the_network() -> None:
    parsed = parse_nccl_debug(_sample("nccl-2.9-efa-p4d-two-nodes-mpi-tags.txt"))
    assert (parsed.network, parsed.ofi_provider, parsed.ofi_fabric) == ("AWS Libfabric", "efa", None)
    assert not any("Selected Provider" in u.text for u in parsed.unplaced)


def test_ofi_provider_in_later_plugin_wordings() -> None:
    # aws-ofi-nccl src/nccl_ofi_net.c: "Selected Provider is %s (found %d nics)" (1.6 to 1.13), "Selected provider
    # is %s, fabric is %s (found %d nics)" (1.14 on); its NCCL_OFI_INFO puts "NET/OFI " before the format.
    nics = parse_nccl_debug(_P + "NET/OFI Selected Provider is efa (found 4 nics)\n")
    assert (nics.ofi_provider, nics.ofi_nics) == ("efa", 4)
    fabric = parse_nccl_debug(_P + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)\n")
    assert (fabric.ofi_provider, fabric.ofi_fabric, fabric.ofi_nics) == ("efa", "efa-direct", 32)


def test_socket_threads_and_sockets_per_thread() -> None:
    parsed = parse_nccl_debug(_sample("nccl-2.11-socket-two-containers-aws-batch.txt"))
    assert (parsed.network, parsed.socket_threads, parsed.sockets_per_thread) == ("Socket", 2, 8)
    assert parsed.socket_interfaces  # the interface list of the same transport is still read


def test_gpudirect_tcpx_threads_and_sockets_per_thread() -> None:
    # google/nccl-plugin-gpudirecttcpx src/connect.cc, tcpxGetNsockNthread: `"NET/" PRODUCT_NAME ": Using %d threads
    # and %d sockets per thread"` (PRODUCT_NAME "GPUDirectTCPX", src/macro.h), printed as each listen starts.
    parsed = parse_nccl_debug(
        "a3-0:100:100 [0] NCCL INFO NET/GPUDirectTCPX : Using [0]eth1:192.168.0.2<0> [1]eth2:192.168.1.2<0>\n"
        "a3-0:100:100 [0] NCCL INFO Using network GPUDirectTCPX_v7\n"
        "a3-0:100:120 [0] NCCL INFO NET/GPUDirectTCPX: Using 6 threads and 1 sockets per thread\n")
    assert (parsed.network, parsed.socket_threads, parsed.sockets_per_thread) == ("GPUDirectTCPX_v7", 6, 1)
    assert parsed.socket_interfaces == ["eth1:192.168.0.2", "eth2:192.168.1.2"]  # a count list is no interface list
    assert not any("sockets per thread" in u.text for u in parsed.unplaced)
