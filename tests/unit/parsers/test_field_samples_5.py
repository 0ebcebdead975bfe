"""Values read from the real outputs of the fifth pass: RDMA devices as rdma-core releases after 2020
print them, and ports that `rdma link` lists without a netdev."""

from __future__ import annotations

from provisioner.parsers import parse

from ._samples import read


def test_ibv_devinfo_efa_after_rdma_core_names_its_link_layer_unspecified() -> None:
    # rdma-core since late 2020 prints `link_layer: Unspecified` for EFA (it printed InfiniBand before,
    # ibv_devinfo-8); the udev name `rdmap16s27` replaces `efa_0`.
    facts = parse("ibv_devinfo", read("ibv_devinfo-10-efa-unspecified-link-layer.txt"))
    assert facts["complete"] is True and facts["unplaced"] == [] and facts["missing"] == []
    (device,) = facts["devices"]
    assert (device["name"], device["transport"], device["vendor_id"], device["vendor_part_id"], device["hw_ver"]) == (
        "rdmap16s27", "unspecified (4)", "0x1d0f", 61344, "0xEFA0")
    assert (device["node_guid"], device["board_id"], device["phys_port_cnt"]) == ("0000:0000:0000:0000", None, 1)
    (port,) = device["ports"]
    assert (port["state"], port["state_code"], port["max_mtu"], port["active_mtu"], port["link_layer"]) == (
        "PORT_ACTIVE", 4, 4096, 4096, "Unspecified")
    assert (port["sm_lid"], port["port_lid"], port["attributes"]["port_lmc"]) == (0, 0, "0x01")


def test_rdma_link_ib_port_without_ipoib_has_no_netdev() -> None:
    facts = parse("rdma_link", read("rdma-link-5-ib-polling.txt"))
    (link,) = facts["links"]
    assert (link["device"], link["port"], link["state"], link["physical_state"], link["netdev"]) == (
        "mlx5_7", 1, "DOWN", "POLLING", None)
