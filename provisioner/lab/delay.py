"""A delay line on the lab's management path: a real network's round-trip time, without netem.

This kernel has no `netem` qdisc, so the delay is made in user space, at the IP layer: the host reaches
the management network through a TUN device (`<prefix>-rtt`, holding the host's 198.18.<slot>.254),
and a small router namespace (`fabnet-<lab>-rtt`) holds a second TUN and a veth on the management
bridge, answering ARP for .254 (proxy ARP). This process moves each packet from one TUN to the other
after half the round-trip time of the node it is for or from, so every protocol sees the delay: the
TCP handshake and each SSH round trip, and ICMP (`ping`). The data network does not pass through it.

Run by `fabnet lab up --rtt` as `python -m provisioner.lab.delay CONFIG.json`; the lab's state keeps its
pid and `lab down` ends it. The configuration names the two TUN devices, the router's namespace, the
lab-wide round-trip time and per-node exceptions (by management address), in milliseconds.
"""

from __future__ import annotations

import ctypes
import fcntl
import heapq
import json
import os
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
MAX_PACKET = 65536


@dataclass(frozen=True)
class DelayConfig:
    host_tun: str
    router_netns: str
    router_tun: str
    rtt_ms: float
    per_node_ms: dict[str, float]

    def one_way(self, node_ip: str) -> float:
        """Seconds each direction waits: half the node's round-trip time."""
        return self.per_node_ms.get(node_ip, self.rtt_ms) / 2000.0

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True) + "\n"

    @classmethod
    def load(cls, path: Path) -> DelayConfig:
        data = json.loads(path.read_text())
        return cls(data["host_tun"], data["router_netns"], data["router_tun"], float(data["rtt_ms"]),
                   {ip: float(ms) for ip, ms in data.get("per_node_ms", {}).items()})


def parse_rtt(text: str | float | int) -> float:
    """`20ms`, `0.5ms`, `1s`, `20` (milliseconds) -> milliseconds; ValueError for anything else."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        raw = str(text).strip().lower()
        scale = 1000.0 if raw.endswith("s") and not raw.endswith("ms") else 1.0
        number = raw.removesuffix("ms").removesuffix("s").strip()
        try:
            value = float(number) * scale
        except ValueError:
            raise ValueError(f"not a round-trip time: {text!r} (use e.g. 20ms, 0.5ms or 1s)") from None
    if not 0 <= value <= 10_000:
        raise ValueError(f"round-trip time {text!r} is out of range (0 to 10s)")
    return value


def packet_ips(packet: bytes) -> tuple[str, str] | None:
    """(source, destination) of an IPv4 packet; None for anything else (dropped: the lab is IPv4-only)."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    return ".".join(map(str, packet[12:16])), ".".join(map(str, packet[16:20]))


def _open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def _open_tun_in(netns: str, name: str) -> int:
    """A TUN device is attached in the namespace of the thread that opens it: step in and back out."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        try:
            return _open_tun(name)
        finally:
            if libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the host namespace")
    finally:
        os.close(home)
        os.close(target)


def serve(config: DelayConfig) -> None:
    host = _open_tun(config.host_tun)
    router = _open_tun_in(config.router_netns, config.router_tun)
    # (due time, sequence, where to write, packet): one fixed delay per node keeps each flow in order.
    pending: list[tuple[float, int, int, bytes]] = []
    sequence = 0
    while True:
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else None
        ready, _, _ = select.select([host, router], [], [], timeout)
        now = time.monotonic()
        for fd in ready:
            for _ in range(64):
                try:
                    packet = os.read(fd, MAX_PACKET)
                except BlockingIOError:
                    break
                ips = packet_ips(packet)
                if ips is None:
                    continue
                # Host -> node packets are keyed by destination, node -> host ones by source.
                node_ip = ips[1] if fd == host else ips[0]
                out = router if fd == host else host
                sequence += 1
                heapq.heappush(pending, (now + config.one_way(node_ip), sequence, out, packet))
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, out, packet = heapq.heappop(pending)
            try:
                os.write(out, packet)
            except OSError:
                pass  # a full queue or a device going away loses the packet, as a network would


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m provisioner.lab.delay CONFIG.json", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(DelayConfig.load(Path(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
