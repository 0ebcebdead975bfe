"""fabnet lab emulation of nccl-tests' all_reduce_perf, for lab nodes (which have no GPU and no NCCL).

Installed on lab nodes as /usr/local/bin/all_reduce_perf (a wrapper that runs this file with the node's
shared Python). Each process is one rank of a REAL all-reduce: torch.distributed with gloo over TCP
on the lab's data network, not NCCL. The rank, world size and rendezvous come from the launcher that
started it: srun (SLURM_PROCID, SLURM_NTASKS, the first node of SLURM_NODELIST) or Open MPI
(OMPI_COMM_WORLD_RANK/SIZE with MASTER_ADDR); MASTER_ADDR/MASTER_PORT override. gloo binds to
GLOO_SOCKET_IFNAME (fabnet sets it to the data interface), else NCCL_SOCKET_IFNAME's first name.

Rank 0 prints nccl-tests' output format (header, `#  Rank` lines, the out-of-place / in-place table
with `#wrong`, `# Out of bounds values`, `# Avg bus bandwidth`), its first line saying that it is this
emulation. Out-of-place copies the input into a separate buffer before reducing it (that copy is
timed too); a size's time is the slowest rank's mean; busbw = algbw x 2(n-1)/n, as nccl-tests defines
it. Standard library and torch only: it never imports fabnet.
"""

import argparse
import datetime
import os
import re
import socket
import sys
import time
import warnings
from typing import Any

LABEL = "# fabnet lab emulation of nccl-tests all_reduce_perf: gloo all-reduce over TCP, not NCCL"
FORMAT_VERSION = "2.17.9"  # the nccl-tests release whose output format this follows
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text: str) -> int:
    match = re.match(r"^([0-9]+)([KMGT]?)$", text.strip().upper())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def first_node(nodelist: str) -> str:
    """The first name of a Slurm hostlist: `gpu[01-03,07],cpu1` -> gpu01."""
    head = re.match(r"^([^,\[]*)(?:\[([^\]]*)\])?", nodelist.strip())
    if not head:
        return nodelist
    prefix, bracket = head.group(1), head.group(2)
    if not bracket:
        return prefix
    return prefix + bracket.split(",")[0].split("-")[0]


def identity() -> "tuple[int, int, int, str, int]":
    """(rank, world, local rank, master address, master port) from the launcher's environment."""
    env = os.environ
    if "SLURM_PROCID" in env:
        rank, world = int(env["SLURM_PROCID"]), int(env.get("SLURM_NTASKS", "1"))
        local = int(env.get("SLURM_LOCALID", "0"))
        master = env.get("MASTER_ADDR") or first_node(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST", ""))
        # One port per job step, so steps that follow each other do not meet a socket still closing.
        step = int(env.get("SLURM_JOB_ID", "0")) * 16 + int(env.get("SLURM_STEP_ID", "0") or 0)
        port = int(env.get("MASTER_PORT") or 20000 + step % 20000)
    elif "OMPI_COMM_WORLD_RANK" in env:
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
        master, port = env.get("MASTER_ADDR", ""), int(env.get("MASTER_PORT", "29411"))
    else:
        rank, world, local = 0, 1, 0
        master, port = env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29411"))
    if not master:
        raise SystemExit("all_reduce_perf (fabnet lab emulation): cannot tell the first rank's host; set MASTER_ADDR")
    return rank, world, local, master, port


def timed(dist: Any, op: Any, iters: int) -> float:
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iters):
        op()
    return (time.perf_counter() - started) / iters


def gather_ranks(torch: Any, dist: Any, world: int, rank: int, host: str,
                 local: int) -> list[tuple[int, int, str, int]]:
    """(rank, pid, host, local rank) of every rank, for the `#  Rank` lines (plain tensors: no numpy)."""
    name = host.encode()[:64].ljust(64, b"\0")
    mine = torch.tensor([os.getpid(), local, *name], dtype=torch.int64)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    found = []
    for index, row in enumerate(every):
        values = [int(v) for v in row.tolist()]
        found.append((index, values[0], bytes(values[2:]).rstrip(b"\0").decode(errors="replace"), values[1]))
    return found


def time_cell(us: float) -> str:
    # nccl-tests' widths: fewer decimals as the time grows, so the column stays 7 wide.
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="all_reduce_perf", description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--minbytes", type=size, default=32 << 20)
    parser.add_argument("-e", "--maxbytes", type=size, default=32 << 20)
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup_iters", type=int, default=1)
    parser.add_argument("-c", "--check", type=int, default=1)
    parser.add_argument("-g", "--ngpus", type=int, default=1)  # one rank per process, as with -g 1
    parser.add_argument("-t", "--nthreads", type=int, default=1)
    args, _unknown = parser.parse_known_args(argv)
    rank, world, local, master, port = identity()
    if not os.environ.get("GLOO_SOCKET_IFNAME"):
        nccl = os.environ.get("NCCL_SOCKET_IFNAME", "").lstrip("=")
        if nccl and not nccl.startswith("^"):
            os.environ["GLOO_SOCKET_IFNAME"] = nccl.split(",")[0]
    timeout = datetime.timedelta(seconds=float(os.environ.get("FABNET_LAB_EMULATION_TIMEOUT", "60")))
    host = socket.gethostname()
    warnings.filterwarnings("ignore")
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        print(f"{host}: Test failure all_reduce_perf (fabnet lab emulation): torch is missing: {exc}", flush=True)
        return 2
    try:
        dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
                                timeout=timeout)
    except Exception as exc:  # the launcher's log shows why this rank could not join
        print(f"{host}: Test failure all_reduce_perf (fabnet lab emulation): rendezvous {master}:{port}: "
              f"{type(exc).__name__}: {exc}", flush=True)
        return 2
    ranks = gather_ranks(torch, dist, world, rank, host, local)
    sizes = [args.minbytes]
    while sizes[-1] * max(2, args.stepfactor) <= args.maxbytes:
        sizes.append(sizes[-1] * max(2, args.stepfactor))
    out: list[str] = []
    if rank == 0:
        out += [LABEL,
                f"# nccl-tests version {FORMAT_VERSION} (output format) emulated with torch {torch.__version__} gloo",
                "# Collective test starting: all_reduce_perf",
                f"# nThread {args.nthreads} nGpus 1 minBytes {args.minbytes} maxBytes {args.maxbytes} step: "
                f"{args.stepfactor}(factor) warmup iters: {args.warmup_iters} iters: {args.iters} agg iters: 1 "
                f"validation: {args.check} graph: 0",
                "#", "# Using devices"]
        out += [f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {h:>10} device {d:2d} [0000:00:00] gloo CPU (emulation)"
                for r, pid, h, d in ranks]
        out += ["#",
                "#                                                              out-of-place                       "
                "in-place",
                "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
                "algbw   busbw  #wrong",
                "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
                "(GB/s)  (GB/s)"]
        print("\n".join(out), flush=True)
    factor = 2 * (world - 1) / world if world > 1 else 0.0
    expected = world * (world + 1) / 2
    busbws: list[float] = []
    wrong_total = 0
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        source = torch.zeros(count, dtype=torch.float32)
        target = torch.empty_like(source)

        def out_of_place(source: Any = source, target: Any = target) -> None:
            target.copy_(source)
            dist.all_reduce(target)

        def in_place(source: Any = source) -> None:
            dist.all_reduce(source)

        cells = []
        for op in (out_of_place, in_place):
            for _ in range(args.warmup_iters):
                op()
            seconds = torch.tensor([timed(dist, op, args.iters)], dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
            wrong = 0
            if args.check:
                # Every rank adds rank+1, so each element must be 1+2+...+world exactly.
                check = torch.full((count,), float(rank + 1), dtype=torch.float32)
                dist.all_reduce(check)
                wrong_t = torch.tensor([int((check != expected).sum().item())], dtype=torch.int64)
                dist.all_reduce(wrong_t)
                wrong = int(wrong_t.item())
            us = float(seconds.item()) * 1e6
            algbw = count * 4 / 1e9 / (us / 1e6) if us > 0 else 0.0
            busbws.append(algbw * factor)
            wrong_total += wrong
            cells.append(f"{time_cell(us)}  {algbw:6.2f}  {algbw * factor:6.2f}  {wrong:6d}")
        if rank == 0:
            print(f"{count * 4:12d}  {count:12d}  {'float':>8}  {'sum':>6}  {-1:6d}  " + "  ".join(cells), flush=True)
    dist.barrier()
    if rank == 0:
        average = sum(busbws) / len(busbws) if busbws else 0.0
        print(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}", flush=True)
        print(f"# Avg bus bandwidth    : {average:g}", flush=True)
        print("#\n# Collective test concluded: all_reduce_perf\n#", flush=True)
    dist.destroy_process_group()
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
