"""`rdma link` forms: InfiniBand lines without a netdev, `-j` JSON, `rdma dev` pasted in, and cut lines."""

from __future__ import annotations

from provisioner.parsers.rdma_link import parse_rdma_link

from ._samples import read

JSON = ('[{"ifindex":0,"ifname":"mlx5_0","port":1,"state":"ACTIVE","physical_state":"LINK_UP",'
        '"netdev":"ens1f0np0","netdev_index":4},{"ifindex":1,"ifname":"mlx5_1","port":1,"state":"DOWN",'
        '"physical_state":"DISABLED"}]\n')


def test_infiniband_link_without_netdev() -> None:
    links = parse_rdma_link(read("rdma-link-5-ib-polling.txt"))
    link = links.links[0]
    assert (link.device, link.state, link.physical_state, link.netdev) == ("mlx5_7", "DOWN", "POLLING", None)
    assert (link.attributes["lid"], link.attributes["sm_lid"], links.complete) == ("3403", "1", True)


def test_json_array() -> None:
    links = parse_rdma_link(JSON)
    assert [(x.device, x.state, x.netdev, x.attributes.get("netdev_index")) for x in links.links] == [
        ("mlx5_0", "ACTIVE", "ens1f0np0", "4"), ("mlx5_1", "DOWN", None, None)]
    assert links.complete


def test_every_cut_of_the_json_is_incomplete() -> None:
    for end in range(1, len(JSON) - 2):
        assert parse_rdma_link(JSON[:end]).complete is False


def test_every_cut_inside_a_link_line_before_its_state_value_is_incomplete() -> None:
    text = read("rdma-link-5-ib-polling.txt").rstrip("\n")
    for end in range(len("link mlx5_7/1 "), text.index(" DOWN") + 1):
        if text[end - 1] == " " or text[end:end + 1] == " ":  # a cut at a word boundary
            part = parse_rdma_link(text[:end])
            assert (part.complete, part.links) == (False, []), text[:end]


def test_a_pasted_rdma_dev_line_is_named() -> None:
    links = parse_rdma_link("0: mlx5_0: node_type ca fw 20.31.1014 node_guid 1070:fd03:00e5:f118\n"
                            "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0\n")
    assert [(u.line, u.reason) for u in links.unplaced] == [
        (1, "an 'rdma dev' line (a device, not a link: no port state)")]
    assert [x.netdev for x in links.links] == ["ens1f0"]
