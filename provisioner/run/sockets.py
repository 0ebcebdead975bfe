"""The TCP layer under SSH: a dial that Ctrl-C can stop, sockets that acknowledge at once, and
`interrupt()`, which shuts every socket dialled here so that no login or exec waits out its timeout.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import threading
import time
import weakref

POLL = 0.2  # seconds between checks of the deadline and of Ctrl-C while waiting on the network

interrupted = threading.Event()  # set by interrupt(); every wait on the network checks it
_sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
_sockets_lock = threading.Lock()


def interrupt() -> None:
    """Stop every login and exec in progress (from any thread): their calls return or raise within POLL."""
    interrupted.set()
    with _sockets_lock:
        live = list(_sockets)
    for sock in live:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def reset() -> None:
    interrupted.clear()


def _track(sock: socket.socket) -> None:
    with _sockets_lock:
        _sockets.add(sock)



_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class QuickAckSocket(socket.socket):
    """A socket that acknowledges what it reads at once.

    sshd leaves Nagle's algorithm on for exec sessions, so a small packet of its waits until the one before
    is acknowledged; Linux delays that acknowledgement by up to 40 ms. After login sshd sends a global
    request and then the channel-open confirmation: every login stalled 40 ms there (measured at 20 ms
    RTT: channel open took 80 ms instead of 20). The quick-ACK mode does not stick, so it is asked for
    before every read (one cheap setsockopt).
    """

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if _QUICKACK is not None:
            try:
                self.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass
        return super().recv(bufsize, flags)


def dial(address: str, port: int, timeout: float) -> socket.socket:
    """A connected TCP socket, waiting in slices so that Ctrl-C is seen; TCP_NODELAY set before the
    handshake (it cuts login time several-fold)."""
    deadline = time.monotonic() + timeout
    last: OSError = TimeoutError("timed out")
    # An ASCII name goes as bytes: as text, the lookup would load the IDNA codec (about 8 ms) for nothing.
    host: str | bytes = address.encode("ascii") if address.isascii() else address
    for family, kind, proto, _name, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = QuickAckSocket(family, kind, proto)
        _track(sock)
        sock.setblocking(False)
        code = sock.connect_ex(sockaddr)
        while code in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            remaining = deadline - time.monotonic()
            if interrupted.is_set() or remaining <= 0:
                sock.close()
                if interrupted.is_set():
                    raise InterruptedError("interrupted")
                raise TimeoutError("timed out")
            _, writable, _ = select.select([], [sock], [], min(POLL, remaining))
            if writable:
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code == 0:
            sock.setblocking(True)
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        sock.close()
        last = OSError(code, os.strerror(code))
    raise last
