"""fabnet smoke, node side: one rank of an all-reduce sweep with torch.distributed.

Uploaded by fabnet and run with the node's Python; it needs only the standard library and torch (it
never imports fabnet). It appends one JSON object per line to --events as it goes (started, joined,
one per message size, one per pair measured, done, or error), so the launcher can tell how far every
rank got even when the run is killed at its deadline.
"""

import argparse
import datetime
import json
import os
import sys
import threading
import time
import warnings
from typing import Any


class Events:
    def __init__(self, path: str, rank: int) -> None:
        self.path = path
        self.rank = rank

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "rank": self.rank, "t": round(time.time(), 3), **fields}
        # One write per line, flushed at once: a rank killed a moment later still leaves a readable file.
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")
        if event == "error":
            # The rank's own output says it too, as a job's log would: what a launcher collects (and
            # `fabnet explain` reads) is then more than a warning or nothing.
            print(f"rank {self.rank} error ({fields.get('stage')}): {fields.get('message')}", file=sys.stderr,
                  flush=True)


def watchdog(events: Events, seconds: float) -> None:
    def expire() -> None:
        events.emit("error", stage="deadline", message=f"own deadline of {seconds:g} s reached")
        os._exit(3)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def sweep(args: argparse.Namespace, events: Events, torch: Any, dist: Any, device: Any) -> None:
    world = dist.get_world_size()
    expected = world * (world + 1) / 2
    for size in args.sizes:
        count = max(1, size // 4)
        # Zeros in the timed loop: the sum stays zero however many iterations run, so values never
        # grow into infinities or denormals that would change the timing.
        data = torch.zeros(count, dtype=torch.float32, device=device)
        events.emit("size_start", bytes=count * 4)
        for _ in range(args.warmup):
            dist.all_reduce(data)
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(data)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - started) / args.iters
        # Correctness: every rank contributes rank+1, so each element must be 1+2+...+world exactly.
        data.fill_(float(dist.get_rank() + 1))
        dist.all_reduce(data)
        wrong = int((data != expected).sum().item())
        events.emit("size", bytes=count * 4, seconds=seconds, wrong=wrong)


def pairs(args: argparse.Namespace, events: Events, torch: Any, dist: Any, device: Any) -> None:
    """Each round, disjoint pairs of ranks exchange --pair-bytes both ways at once, all pairs side by side.

    An exchange of S bytes each way moves what a 2-rank ring all-reduce of S bytes moves per rank, so
    S / time is that all-reduce's busbw: a figure comparable across hosts, measured in the process
    group already built (no second rendezvous, no second torch import).
    """
    me = dist.get_rank()
    count = max(1, args.pair_bytes // 4)
    send = torch.zeros(count, dtype=torch.float32, device=device)
    got = torch.empty_like(send)

    def exchange(partner: int) -> None:
        if args.backend == "nccl":  # NCCL needs both directions in one group, or the two sides deadlock
            ops = [dist.P2POp(dist.isend, send, partner), dist.P2POp(dist.irecv, got, partner)]
            requests = dist.batch_isend_irecv(ops)
        else:
            requests = [dist.isend(send, partner), dist.irecv(got, partner)]
        for request in requests:
            request.wait()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for number, round_pairs in enumerate(args.pairs):
        partner = next((b if a == me else a for a, b in round_pairs if me in (a, b)), None)
        dist.barrier()
        if partner is None:
            continue
        exchange(partner)  # warm-up: connections are opened lazily
        started = time.perf_counter()
        for _ in range(args.iters):
            exchange(partner)
        seconds = (time.perf_counter() - started) / args.iters
        events.emit("pair", round=number, partner=partner, bytes=count * 4, seconds=seconds)
    dist.barrier()


def _rounds(text: str) -> "list[list[tuple[int, int]]]":
    """'0-1,2-3;1-2,3-0' -> [[(0, 1), (2, 3)], [(1, 2), (3, 0)]]; '' -> no rounds."""
    return [[(int(p.split("-")[0]), int(p.split("-")[1])) for p in r.split(",") if p] for r in text.split(";") if r]


def _not_joined(events: Events, store: Any, joined: "list[str]", rank: int, exc: Exception) -> int:
    """The rendezvous failed: rank 0 names the ranks whose mark never reached the store."""
    missing = [r for r, key in enumerate(joined) if not store.check([key])] if rank == 0 else []
    events.emit("error", stage="rendezvous", missing=missing, message=f"{type(exc).__name__}: {str(exc)[:300]}")
    return 2


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--local-rank", type=int, default=0)
    parser.add_argument("--master", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    parser.add_argument("--sizes", type=lambda text: [int(s) for s in text.split(",")], required=True)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--timeout", type=float, required=True, help="rendezvous and per-collective timeout")
    parser.add_argument("--deadline", type=float, required=True, help="seconds after which this rank exits")
    parser.add_argument("--events", required=True)
    parser.add_argument("--pairs", type=_rounds, default=[], help="rounds of rank pairs: 0-1,2-3;1-2,3-0")
    parser.add_argument("--pair-bytes", type=int, default=0)
    args = parser.parse_args(argv)

    events = Events(args.events, args.rank)
    events.emit("started", pid=os.getpid(), pgid=os.getpgid(0), host=os.uname().nodename)
    watchdog(events, args.deadline)
    try:
        warnings.filterwarnings("ignore")
        import torch
        import torch.distributed as dist

        if args.backend == "nccl":
            torch.cuda.set_device(args.local_rank)
            device = torch.device("cuda", args.local_rank)
        else:
            device = torch.device("cpu")
        timeout = datetime.timedelta(seconds=args.timeout)
        # The rendezvous in two steps, so a failure can say which ranks never arrived: every rank marks
        # itself in the store before the process group (and gloo's mesh) is built.
        try:
            # torch.distributed re-exports TCPStore from its C extension without listing it in its stubs.
            store = dist.TCPStore(args.master, args.port, args.world,  # type: ignore[attr-defined]
                                  is_master=args.rank == 0, timeout=timeout, wait_for_workers=False)
        except Exception as exc:
            events.emit("error", stage="connect", message=f"cannot reach the rendezvous {args.master}:{args.port}: "
                        f"{type(exc).__name__}: {str(exc)[:300]}")
            return 2
        events.emit("connected")
        joined = [f"fabnet/joined/{r}" for r in range(args.world)]
        store.set(joined[args.rank], "1")
        try:
            # NCCL builds its communicator only at the first collective, and its bootstrap then waits
            # for a missing rank with no timeout at all (seen on NCCL 2.28 through torch 2.11): wait in
            # the store, under our own timeout, so the rank that never came is named.
            store.wait(joined, timeout)
        except Exception as exc:
            return _not_joined(events, store, joined, args.rank, exc)
        try:
            # Our own timeout on the rendezvous and on every collective (gloo's default is 30 minutes).
            dist.init_process_group(args.backend, store=store, rank=args.rank, world_size=args.world,
                                    timeout=timeout)
        except Exception as exc:
            return _not_joined(events, store, joined, args.rank, exc)
        events.emit("joined", torch=torch.__version__)
        sweep(args, events, torch, dist, device)
        if args.pairs and args.pair_bytes > 0:
            pairs(args, events, torch, dist, device)
        dist.barrier()
        events.emit("done")
        dist.destroy_process_group()
    except Exception as exc:  # every failure becomes an event the launcher can explain
        events.emit("error", stage="run", message=f"{type(exc).__name__}: {str(exc)[:500]}")
        return 2
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
