"""The failure records in an NCCL log: RDMA work-completion errors, failed verbs / libfabric calls and
asynchronous HCA events, read from the message of a (whole, unwrapped) NCCL WARN.

The wording changed across NCCL releases; each pattern here reads every form by its structure:

- completion errors: `NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129` (2.3 to
  2.11: no peer), `... from peer 10.0.0.2<4567> with error 12, opcode 0, len 0, vendor err 129 (Recv)`
  (2.12 to 2.18), `... with status=12 opcode=0 len=0 vendor err 129 (Recv) ... hca mlx5_0` (2.19 on),
  `... with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 ... hca mlx5_0` (2.28.7 on;
  `UNKNOWN_STATUS(23)` for a status NCCL does not name),
  and the resiliency path's `NET/IB: Unsupported completion status IBV_WC_REM_ACCESS_ERR (10)` (2.30).
- failed calls: `Call to ibv_create_qp failed` (2.3 on, misc/ibvwrap), later `... failed with error
  Cannot allocate memory` and `... errno 12`; `ibv_post_send() failed with error ...`; `Call to
  ibv_modify_qp failed with 110 Connection timed out, ...`; the OFI plugin's `NET/OFI ... fi_mr_reg
  failed` / `OFI fi_getinfo() call failed: No data available`.
- async events: `NET/IB : Got async event : local catastrophic error` (2.3 to 2.19, every event but
  `communication established`), `NET/IB : mlx5_0:1 Got async event : ...` (2.21), `... Got async error
  event: port error` and `... async fatal event[ on QP (0x..)]: ...` (2.23 to 2.27), `... Got non-fatal async
  event: port error(10)` (2.28 on), `NET/IB : mlx5_0:1 GID table changed` (2.28.3 on) and, for an event
  NCCL does not list, `NET/IB : mlx5_0:1 unknown event type (18)`. The event names are libibverbs'
  ibv_event_type_str; each event is classed by what it means (`kind`), not by the word NCCL put before it.
"""

from __future__ import annotations

import re

from provisioner.parsers._text import Fact

# A poster who deletes the peer's address leaves `from peer with error 4` (NVIDIA/nccl#1052): still a completion.
_COMPLETION = re.compile(
    r"(?:Got completion(?:\s+from peer(?:\s+(?!with\s)(?P<peer>[^\s<,]+)(?:<(?P<port>[0-9]+)>)?)?)?\s*with\s+"
    r"(?:error|status)|Unsupported completion status)\s*[=:]?\s*"
    r"(?:(?P<symbol>[A-Z][A-Z0-9_]*)\s*\(\s*)?(?P<status>[0-9]+)"
)
_OPCODE = re.compile(r"\bopcode\s*[= ]\s*(?:\w+\()?(?P<opcode>[0-9]+)")
_VENDOR = re.compile(r"\bvendor[ _]err(?:or)?\s*[= ]?\s*(?P<vendor>[0-9]+)")
_HCA = re.compile(r"\b(?:hca|dev(?:ice)?)\s+(?P<hca>[A-Za-z][\w.-]*[0-9])\b")
_DEVICE_PORT = re.compile(r"NET/IB\s*:\s*(?P<hca>[A-Za-z][\w.-]*[0-9]):[0-9]+\s")
# The request's type: `(Recv)` (2.18 to 2.28.3), `req_type=Recv` (2.28.7/2.28.9); NCCL's are Send, Recv, Flush,
# IPut and Unused.
_DIRECTION = re.compile(r"\((?P<a>Recv|Send|Flush|IPut|Unused|Read|Write)\)|\breq_type=(?P<b>[A-Za-z]+)")
# The queue pair's two ends (2.19 on): `localGid ::ffff:10.0.106.7 remoteGids::ffff:10.0.106.6` (NCCL prints no
# blank after `remoteGids`), `localGid fe80::... remoteGids fe80::...`.
_GIDS = re.compile(r"\blocalGid\s+(?P<local>[0-9A-Fa-f:.]+)\s+remoteGids?\s*(?P<remote>[0-9A-Fa-f:.]+)")

# A verbs or libfabric call that failed: `Call to ibv_reg_mr failed with error Cannot allocate memory`,
# `ibv_post_send() failed with error ...`, `fi_mr_reg failed`, `OFI fi_getinfo() call failed: ...`.
_CALL = re.compile(
    r"(?:Call to\s+)?(?P<call>(?:ibv|mlx5dv|rdma|fi)_\w+)(?:\(\))?\s*(?:call\s+)?(?:failed|returned)"
    r"(?:\s+with(?:\s+error)?)?\s*:?\s*(?P<error>.*)$"
)
_ERRNO = re.compile(r"\berrno\s*[= ]?\s*(?P<errno>[0-9]+)|\b(?:RC|rc|ret)\s*[:=]?\s*-?(?P<rc>[0-9]+)")
_OFI = re.compile(r"^NET/OFI\b|\bOFI\b.*\bfail|libfabric", re.IGNORECASE)
# What the OFI plugin warns about at every start on a healthy host: an optional NCCL symbol it looks up, a
# sysfs path or DMI file it could not read (aws-ofi-nccl).
OFI_BENIGN = re.compile(r"Could not find \w+ symbol|pciPath|Error opening file: /sys/|Could not find real path",
                        re.IGNORECASE)
_ASYNC = re.compile(
    r"NET/IB\s*:\s*(?:(?P<hca>[A-Za-z][\w.-]*[0-9]):[0-9]+\s+)?(?:Got\s+)?(?P<kind>non-fatal\s+|fatal\s+)?"
    r"async\s+(?:fatal\s+|error\s+)?event(?:\s+on\s+\w+)?[^:]*:\s*(?P<event>[^(]+?)\s*(?:\((?P<code>[0-9]+)\))?\s*$"
    r"|NET/IB\s*:\s*(?P<hca2>[A-Za-z][\w.-]*[0-9]):(?P<port2>[0-9]+)\s+(?:(?P<gid>GID table changed)"
    r"|unknown event type\s*\((?P<code2>[0-9]+)\))",
    re.IGNORECASE,
)
# What each event means (enum ibv_event_type, libibverbs' ibv_event_type_str wording), most specific first:
# the device itself failed; a queue pair / completion queue went to error; the port went down; or the
# subnet or port only changed state (benign on its own: an SM sweep, a link coming up, an address change).
_EVENT_KINDS = (
    (re.compile(r"local catastrophic error|device fatal|work queue catastrophic|SRQ catastrophic|WQ fatal", re.I),
     "device"),
    (re.compile(r"CQ error|invalid request local work queue|local access violation", re.I), "queue"),
    (re.compile(r"port error|path migration request error", re.I), "port"),
)
# `unknown event type (N)`: the enum values NCCL leaves out of its list (18 GID change, 19 WQ fatal).
_EVENT_CODES = {18: "GID table change", 19: "WQ fatal"}


class CompletionError(Fact):
    """`NET/IB : Got completion ... with error N`: a work request failed on an RDMA queue pair.

    `status` is the ibverbs work-completion status (12 = IBV_WC_RETRY_EXC_ERR, 13 = RNR retry exceeded,
    5 = flushed, 4 = protection error); `vendor_error` the HCA's own code; `line` where it was printed.
    `peer` is None for NCCL releases before 2.12, which did not name it."""

    host: str | None = None
    device: str | None = None
    peer: str | None = None
    peer_port: int | None = None
    status: int
    vendor_error: int | None = None
    opcode: int | None = None
    direction: str | None = None
    local_gid: str | None = None  # the GIDs of the queue pair's two ends, as printed (2.19 on)
    remote_gid: str | None = None
    line: int


class CallFailure(Fact):
    """A verbs (`ibv_*`, `mlx5dv_*`) or libfabric (`fi_*`, NET/OFI) call that failed, as a WARN says."""

    host: str | None = None
    api: str  # "verbs" or "ofi"
    call: str | None = None
    error: str
    errno: int | None = None
    line: int


class AsyncEvent(Fact):
    """An asynchronous event the HCA raised (`port error`, `local catastrophic error`). `kind`: `device`
    (the HCA failed), `queue` (a queue pair or completion queue went to error), `port` (the link went down)
    or `state` (a change that alone is no failure: port active, LID/P_Key/SM change, client reregistration,
    GID table change)."""

    host: str | None = None
    device: str | None = None
    port: int | None = None
    event: str
    fatal: bool
    kind: str = "state"
    line: int


def completion(message: str, line: int, host: str | None) -> CompletionError | None:
    m = _COMPLETION.search(message)
    if not m:
        return None
    opcode, vendor = _OPCODE.search(message), _VENDOR.search(message)
    hca = _HCA.search(message[m.end():]) or _DEVICE_PORT.search(message)
    direction = _DIRECTION.search(message)
    gids = _GIDS.search(message)
    return CompletionError(
        host=host, device=hca.group("hca") if hca else None, peer=m.group("peer"),
        peer_port=int(m.group("port")) if m.group("port") else None, status=int(m.group("status")),
        vendor_error=int(vendor.group("vendor")) if vendor else None,
        opcode=int(opcode.group("opcode")) if opcode else None,
        direction=(direction["a"] or direction["b"]) if direction else None,
        local_gid=gids["local"] if gids else None, remote_gid=gids["remote"] if gids else None, line=line,
    )


def call_failure(message: str, line: int, host: str | None) -> CallFailure | None:
    m = _CALL.search(message)
    ofi = bool(_OFI.search(message))
    if ofi and OFI_BENIGN.search(message):
        return None
    if not m and not ofi:
        return None
    if m is None and not re.search(r"fail|unable|error|couldn't|could not", message, re.IGNORECASE):
        return None
    call = m.group("call") if m else None
    error = (m.group("error") if m else message).strip().strip(",.")
    code = _ERRNO.search(message)
    errno = int(code.group("errno") or code.group("rc")) if code else None
    # 2.26 on: `Call to ibv_modify_qp failed with 110 Connection timed out, ...`, the errno before its text.
    if m and errno is None and (lead := re.match(r"([0-9]+)\s+(\D.*)$", error)):
        errno, error = int(lead.group(1)), lead.group(2)
    api = "ofi" if ofi or (call or "").startswith("fi_") else "verbs"
    return CallFailure(host=host, api=api, call=call, error=error or message, errno=errno, line=line)


def async_event(message: str, line: int, host: str | None) -> AsyncEvent | None:
    m = _ASYNC.search(message)
    if not m:
        return None
    if m.group("gid"):
        event = "GID table change"
    elif m.group("code2"):
        event = _EVENT_CODES.get(int(m.group("code2")), f"event type {m.group('code2')}")
    else:
        event = m.group("event").strip()
    kind = next((k for pattern, k in _EVENT_KINDS if pattern.search(event)), "state")
    lower = message.lower()
    fatal = kind == "device" or ("non-fatal" not in lower and "fatal" in lower and kind != "state")
    port = re.search(r"NET/IB\s*:\s*[A-Za-z][\w.-]*[0-9]:(?P<port>[0-9]+)\s", message)
    return AsyncEvent(host=host, device=m.group("hca") or m.group("hca2"), port=int(port["port"]) if port else None,
                      event=event, fatal=fatal, kind=kind, line=line)
