"""`ibv_devinfo`: RDMA device and port attributes in libibverbs' layout (tabs included)."""

from __future__ import annotations

from .context import Ctx, make_parser
from .core import RATES, SPEED_ENUM, WIDTH_ENUM, ToolExit
from .kmod import verbs_present
from .links import active_mtu, colon_guid, node_guid, port_gids, read_link, sys_image_guid


def kv(indent: int, key: str, value: str, column: int) -> str:
    """A `key:<tabs>value` line whose value starts at `column` once tabs expand, as libibverbs prints."""
    position = 8 * indent + len(key)
    tabs = 0
    while position < column or tabs == 0:
        position = (position // 8 + 1) * 8
        tabs += 1
    return "\t" * indent + key + "\t" * tabs + value


DEVICE_CAP_BITS = {"RESIZE_MAX_WR": 0, "BAD_PKEY_CNTR": 1, "BAD_QKEY_CNTR": 2, "RAW_MULTI": 3,
                   "AUTO_PATH_MIG": 4, "CHANGE_PHY_PORT": 5, "UD_AV_PORT_ENFORCE": 6, "CURR_QP_STATE_MOD": 7,
                   "SHUTDOWN_PORT": 8, "INIT_TYPE": 9, "PORT_ACTIVE_EVENT": 10, "SYS_IMAGE_GUID": 11,
                   "RC_RNR_NAK_GEN": 12, "SRQ_RESIZE": 13, "N_NOTIFY_CQ": 14, "MEM_WINDOW": 17,
                   "UD_IP_CSUM": 18, "XRC": 20, "MEM_MGT_EXTENSIONS": 21, "MEM_WINDOW_TYPE_2B": 24,
                   "RAW_IP_CSUM": 26, "MANAGED_FLOW_STEERING": 29}
CX_CAP_FLAGS = ["BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG", "CHANGE_PHY_PORT", "PORT_ACTIVE_EVENT",
                "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "MEM_WINDOW", "UD_IP_CSUM", "XRC", "MEM_MGT_EXTENSIONS",
                "MEM_WINDOW_TYPE_2B", "RAW_IP_CSUM", "MANAGED_FLOW_STEERING"]


def _verbose_device(lines: list[str]) -> None:
    def d(key: str, value: object) -> None:
        lines.append(kv(1, key, str(value), 40))

    def flag(name: str) -> None:
        lines.append("\t\t\t\t\t" + name)

    d("max_mr_size:", "0xffffffffffffffff")
    d("page_size_cap:", "0xfffffffffffff000")
    d("max_qp:", 131072)
    d("max_qp_wr:", 32768)
    d("device_cap_flags:", f"0x{sum(1 << DEVICE_CAP_BITS[f] for f in CX_CAP_FLAGS):08x}")
    for name in CX_CAP_FLAGS:
        flag(name)
    for key, value in (("max_sge:", 30), ("max_sge_rd:", 30), ("max_cq:", 16777216), ("max_cqe:", 4194303),
                       ("max_mr:", 16777216), ("max_pd:", 8388608), ("max_qp_rd_atom:", 16),
                       ("max_ee_rd_atom:", 0), ("max_res_rd_atom:", 2097152), ("max_qp_init_rd_atom:", 16),
                       ("max_ee_init_rd_atom:", 0), ("atomic_cap:", "ATOMIC_HCA (1)"), ("max_ee:", 0),
                       ("max_rdd:", 0), ("max_mw:", 16777216), ("max_raw_ipv6_qp:", 0),
                       ("max_raw_ethy_qp:", 0), ("max_mcast_grp:", 2097152), ("max_mcast_qp_attach:", 240),
                       ("max_total_mcast_qp_attach:", 503316480), ("max_ah:", 2147483647), ("max_fmr:", 0),
                       ("max_srq:", 8388608), ("max_srq_wr:", 32767), ("max_srq_sge:", 31),
                       ("max_pkeys:", 128), ("local_ca_ack_delay:", 16)):
        d(key, value)
    lines.append("\tgeneral_odp_caps:")
    flag("ODP_SUPPORT")
    flag("ODP_SUPPORT_IMPLICIT")
    for transport in ("rc", "uc", "ud", "xrc"):
        lines.append(f"\t{transport}_odp_caps:")
        if transport == "uc":
            flag("NO SUPPORT")
        else:
            for cap in ("SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_WRITE", "SUPPORT_READ", "SUPPORT_SRQ"):
                flag(cap)
    d("completion timestamp_mask:", "0x7fffffffffffffff")
    d("hca_core_clock:", "1000000kHZ")
    lines.append("\traw packet caps:")
    for cap in ("C-VLAN stripping offload", "Scatter FCS offload", "IP csum offload", "Delay drop"):
        flag(cap)
    flags = sum(1 << DEVICE_CAP_BITS[f] for f in CX_CAP_FLAGS)
    d("device_cap_flags_ex:", f"0x{flags | 1 << 34 | 1 << 36:X}")
    flag("RAW_SCATTER_FCS")
    flag("PCI_WRITE_END_PADDING")
    d("max_wq_type_rq:", 8388608)
    d("num_comp_vectors:", 63)


def cmd_ibv_devinfo(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Print the attributes of RDMA devices.")
    parser.add_argument("-d", "--ib-dev", dest="dev")
    parser.add_argument("-i", "--ib-port", dest="port", type=int)
    parser.add_argument("-l", "--list", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    opts = parser.parse_args(args)
    hcas = ctx.hw.hcas if verbs_present(ctx.env, ctx.hw) else []
    if opts.list:
        ctx.print(f"{len(hcas)} HCA{'' if len(hcas) == 1 else 's'} found:")
        for hca in hcas:
            ctx.print(f"\t{hca.name}")
        return 0
    if not hcas:
        raise ToolExit("No IB devices found", 255)
    if opts.dev is not None:
        hcas = [h for h in hcas if h.name == opts.dev]
        if not hcas:
            raise ToolExit(f"IB device '{opts.dev}' wasn't found", 255)
    if opts.port is not None and (opts.port < 1 or any(opts.port != h.port for h in hcas)):
        raise ToolExit("Invalid port requested for device", 255)
    lines: list[str] = []
    for hca in hcas:
        link = read_link(ctx.env, hca)
        lines.append(f"hca_id:\t{hca.name}")
        lines.append(kv(1, "transport:", "InfiniBand (0)", 40))
        lines.append(kv(1, "fw_ver:", hca.fw_ver, 40))
        lines.append(kv(1, "node_guid:", colon_guid(node_guid(hca, link)), 40))
        lines.append(kv(1, "sys_image_guid:", colon_guid(sys_image_guid(hca, link)), 40))
        lines.append(kv(1, "vendor_id:", "0x02c9", 40))
        lines.append(kv(1, "vendor_part_id:", str(hca.vendor_part_id), 40))
        lines.append(kv(1, "hw_ver:", "0x0", 40))
        lines.append(kv(1, "board_id:", hca.board_id, 40))
        lines.append(kv(1, "phys_port_cnt:", "1", 40))
        if opts.verbose:
            _verbose_device(lines)
        mtu, mtu_enum = active_mtu(link.mtu)
        lines.append(f"\t\tport:\t{hca.port}")
        lines.append(kv(3, "state:", "PORT_ACTIVE (4)" if link.up else "PORT_DOWN (1)", 48))
        lines.append(kv(3, "max_mtu:", "4096 (5)", 48))
        lines.append(kv(3, "active_mtu:", f"{mtu} ({mtu_enum})", 48))
        lines.append(kv(3, "sm_lid:", "0", 48))
        lines.append(kv(3, "port_lid:", "0", 48))
        lines.append(kv(3, "port_lmc:", "0x00", 48))
        lines.append(kv(3, "link_layer:", "Ethernet", 48))
        if opts.verbose:
            width, speed = RATES[hca.rate] if link.up else ("4X", "SDR")
            speed_enum, speed_text = SPEED_ENUM[speed]
            for key, value in (("max_msg_sz:", "0x40000000"), ("port_cap_flags:", "0x04010000"),
                               ("port_cap_flags2:", "0x0000"), ("max_vl_num:", "invalid value (0)"),
                               ("bad_pkey_cntr:", "0x0"), ("qkey_viol_cntr:", "0x0"), ("sm_sl:", "0"),
                               ("pkey_tbl_len:", "1"), ("gid_tbl_len:", "255"), ("subnet_timeout:", "0"),
                               ("init_type_reply:", "0"),
                               ("active_width:", f"{width} ({WIDTH_ENUM[width]})"),
                               ("active_speed:", f"{speed_text} ({speed_enum})"),
                               ("phys_state:", "LINK_UP (5)" if link.up else "DISABLED (3)")):
                lines.append(kv(3, key, value, 48))
            for gid in port_gids(hca, link):
                text = gid.full if gid.version == "v1" else gid.ntop
                kind = "RoCE v1" if gid.version == "v1" else "RoCE v2"
                lines.append(kv(3, f"GID[{gid.index:3d}]:", f"{text}, {kind}", 48))
        lines.append("")
    ctx.print("\n".join(lines))
    return 0
