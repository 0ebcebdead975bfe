"""Emulated NIC, RDMA and GPU tools for the fabnet lab's virtual nodes, which have no such hardware.

A stdlib-only package (Python 3.11, no fabnet imports: it runs on the node), one module per tool
(`ibv_devinfo.py`, `mlnx_qos.py`, ...; `main.py` maps command names to them). It prints the real tools'
formats byte for byte (tabs included); what it reports comes from the node's profile (`hw.json`), from
state that setters persist, and, for link state, MTU, MAC and addresses, from the node's real data netdev.
Every command answers `--lab-info` (as its first argument) with a line saying it is this emulation.

Invocation
    python3 -I -S labhw --as NAME [ARGS...]   run as command NAME (the directory runs as a script)
    NAME [ARGS...]                            the same when the basename of argv[0] is NAME (a symlink)
    python3 -I -S labhw --as fabnet-lab-init  write the node's sysfs-style files from hw.json, drop live state
    On lab nodes /usr/local/sbin/NAME is the compiled fast path (`labhw-run.c` beside this package): it
    answers a read-only call from output kept for exactly the same inputs, and runs this package otherwise.

Commands
    ofed_info [-s|-n]                          mlnx_qos -i IF [setters]
    dcb [-N] [-s] [-b FILE|-] app|pfc|ets|dcbx show dev IF [KEYWORD...]   (reads mlnx_qos's state; no set)
    ibv_devinfo [-d DEV] [-i PORT] [-v] [-l]   ibstat [-l|-p|-s] [DEV [PORT]]   ibstatus [DEV[:PORT]]
    ibdev2netdev [-v]                          show_gids [DEV [PORT]]
    rdma [-j] [-p] link|dev [show [DEV[/PORT]]]   (other rdma objects run the real rdma)
    nvidia-smi [-L | topo -m | --query-gpu=F,.. --format=csv[,noheader][,nounits]]
    cma_roce_tos [-d DEV] [-p PORT] [-t TOS]   lsmod   modprobe [-r] [-q] [-a] [-n] NAME...

Environment
    FABNET_LAB_HW_ROOT    state root (default /var/lib/fabnet-lab)
    FABNET_LAB_NET_SYSFS  where netdevs are read (default /sys/class/net)

Files under the state root (all writes are atomic: a temporary file in the same directory, then rename)
    hw.json                              the profile; written by the lab builder, only read here
    qos/<netdev>.json                    live mlnx_qos state after the first setter (before: hw.json "qos")
    modules.json                         live loaded/unloaded state of emulated modules after a modprobe
    sys/class/net/<netdev>/ecn/roce_np/enable/<0..7>, sys/class/net/<netdev>/ecn/roce_rp/enable/<0..7>
                                         `0` or `1`, like the mlx5 ECN knobs
    sys/class/net/<netdev>/ecn/roce_np/cnp_dscp
    sys/class/infiniband/<dev>/tc/<port>/traffic_class
                                         empty when unset, `Global tclass=N` when set; the real file takes
                                         `N` and reads back `Global tclass=N`, so readers accept both
    sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos   what cma_roce_tos reads and writes

hw.json schema: every key is optional and `{}` means one ConnectX-7 `mlx5_0` on `eth1` and eight H100s.
A `null` value means "use the default", except for "ofed" where it means OFED is not installed.
    "ofed": "MLNX_OFED_LINUX-23.10-1.1.9.0"      string printed by `ofed_info -s` (`:` added for MLNX_OFED)
    "gpus": {
        "count": 8, "model": "NVIDIA H100 80GB HBM3", "driver": "535.129.03", "cuda": "12.2",
        "memory_mib": 81559,
        "nvlink": "NV18",                          GPU-to-GPU cell of `topo -m`; null: NODE/SYS by NUMA
        "numa_nodes": 2,                           GPU i is on NUMA node i * numa_nodes // count
        "cpu_affinity": ["0-51,104-155", "52-103,156-207"],   one entry per NUMA node
        "pci": ["0000:18:00.0", ...], "uuids": ["GPU-...", ...]   default: derived per node
    }
    "hcas": [{                                     default: one HCA with the values below
        "name": "mlx5_0", "port": 1, "netdev": "eth1",   defaults for hcas[i]: mlx5_<i>, 1, eth<i+1>
        "ca_type": "MT4129", "vendor_part_id": 4129, "fw_ver": "28.39.2048", "board_id": "MT_0000000838",
        "node_guid": "58a2:e103:002a:09b8",        or "0x58a2e103002a09b8"; default: from the netdev MAC
        "sys_image_guid": null,                    default: node_guid
        "rate": 400,                               Gb/s while the link is up (ibstat `Rate`)
        "pci": "0000:0c:00.0",                     HCAs on the same bus:device are PIX in `topo -m`
        "numa": 0                                  default: spread evenly over gpus.numa_nodes
    }]
    "modules": {"nvidia_peermem": false, ...}      loaded or not; merged over MODULES below
    "qos": {"eth1": {                              starting mlnx_qos state of a netdev
        "trust": "pcp", "pfc": [0,0,0,0,0,0,0,0], "dscp2prio": {"26": 3} or 64 priorities,
        "prio_tc": [1,0,2,3,4,5,6,7], "tsa": ["vendor", ...8], "tcbw": [100, ...8], "cable_len": 7,
        "dcbx": "os" or "fw", "prio2buffer": [0, ...8], "buffer_size": [524160,0,0,0,0,0,0,0]}}
    "ecn": {"eth1": {"np": [0, ...8], "rp": [0, ...8], "cnp_dscp": 48}}
    "traffic_class": {"mlx5_0": 106}               default: unset (empty file)
    "roce_tos": {"mlx5_0": 0}
    "topo": {"GPU0/NIC0": "PIX"}                    overrides single cells of `nvidia-smi topo -m`

Behaviour that follows the real hardware
    A port is PORT_ACTIVE / Active / LINK_UP / (Up) when its netdev's operstate is `up`, or `unknown`
    with carrier 1; otherwise PORT_DOWN / Down / DISABLED / (Down), and ibstat's Rate drops to 10.
    active_mtu is the largest IB MTU (256..4096) that fits in the netdev MTU minus 96 bytes of RoCE v2
    headers: 1500 -> 1024 (3), 4200 and 9000 -> 4096 (5).
    GIDs per port: 0/1 the fe80 GID from the MAC (EUI-64) as RoCE v1/v2, then a v1/v2 pair for each IPv4
    address (`::ffff:a.b.c.d`) and each global IPv6 address of the netdev (read with `ip -j addr`).
    RDMA devices exist while mlx5_core and mlx5_ib are loaded (ibv_devinfo also needs ib_uverbs);
    GPUs exist while nvidia is loaded. modprobe loads dependencies and refuses to remove a module in use.
"""
