"""GPU-initiated networking (GIN) a program asked for and could not get, GIN asked for in a way NCCL refuses, and
symmetric buffers the ranks registered differently. The first is the node's network stack or a setting; the other
two are the program (the last named by its ranks).

Wording read (NCCL's source, by release): connecting GIN for a device communicator that asked for it (2.28.7 on)
or for the RMA proxy behind window registration across nodes (2.29.2 to 2.30.3) fails with one WARN each:
`GIN is disabled.` (NCCL_GIN_ENABLE=0), `GIN not supported.` (no GIN plugin came up for the communicator) and
`No GIN-capable devices found.` (a plugin with no device); each returns an error to that call, so the WARN always
means the call failed. 2.29.7 on adds `User requested GIN but not all ranks in the communicator support GIN`, the
FULL/RAIL connection-type refusal and, at connect, `Unable to use GIN: Peermem is not supported, and device N does
not support DMA-BUF.` The INFO lines NCCL prints while probing at init (`Unable to use GIN: Peermem is not
supported, nor DMA-BUF.`, `GIN/Plugin: Failed to initialize any GIN plugin`, a compute capability too low for
GIN) only say GIN is not offered: a job that never asks for it runs, so they name nothing. NCCL prints no
`No local ...` variant of these lines. A device communicator's GIN requirements can be refused before anything
connects (2.29.7 on), the program's request and not the node: GIN signals, counters or barriers asked for with no
GIN connection type (`User requested GIN resources but did not request GIN to be enabled!`; the hybrid barriers
of `barrierCount` count as GIN resources), FULL connections on a communicator already connected RAIL (2.29.7
alone), exclusive GIN contexts past those left or no shared one left (2.29.7 alone; NCCL_GIN_NCONTEXTS sets the
pool; the INFO line capping the count is no failure), and a world GIN barrier over RAIL connections (2.30.7 on).
Under NCCL_CHECK_MODE=DEBUG_GLOBAL (2.29.7 on) rank 0 compares every
collective's symmetric registration: `Coll <op> size <n> symmetric registration check failed on rank <r>: ...`
(registered or not, window, or offset in it, of the send or receive buffer, against rank 0). Elastic GIN
(2.30.7 on) with host-backed segments refuses ranks whose buffers are laid out differently: `Elastic GIN: rank <r>
has <n> segments but another rank has <m> segments` and `Elastic GIN: rank <a> segment <s> size <x> differs from
rank <b> segment <s> size <y>`.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_GIN = re.compile(
    r"WARN\s+(?:(?P<disabled>GIN is disabled\.)|(?P<absent>GIN not supported\.)"
    r"|(?P<nodev>No GIN-capable devices found\.)"
    r"|(?P<ranks>User requested GIN but not all ranks in the communicator support GIN)"
    r"|(?P<rail>User requested GIN connection type NCCL_GIN_CONNECTION_FULL but the communicator supports only)"
    r"|(?P<gdr>Unable to use GIN: Peermem is not supported, and device (?P<dev>[0-9]+) does not support DMA-BUF))")
# A device communicator's GIN requirements NCCL refuses: what the program asked for, by what was wrong with it.
_GIN_ASK = re.compile(
    r"WARN\s+(?:(?P<unrequested>User requested GIN resources but did not request GIN to be enabled)"
    r"|(?P<railed>User requested GIN connection type NCCL_GIN_CONNECTION_FULL but the communicator is already "
    r"connected with NCCL_GIN_CONNECTION_RAIL)"
    r"|(?P<barrier>Cannot create worldGinBarrier with NCCL_GIN_CONNECTION_RAIL)"
    r"|(?P<exclusive>Requested number of exclusive GIN contexts \([0-9]+\) exceeds the unallocated count)"
    r"|(?P<shared>No shared contexts are available \([0-9]+ requested\) as all have been allocated for exclusive))")
_GIN_ASK_SAY = {
    "unrequested": ("GIN signals, counters or barriers without a GIN connection type",
                    "Set ginConnectionType (NCCL_GIN_CONNECTION_FULL or _RAIL) in the ncclDevCommRequirements that ask "
                    "for ginSignalCount, ginCounterCount, barrierCount, railGinBarrierCount or worldGinBarrierCount, "
                    "or ask for none of them: a kernel that synchronises only within the NVLink domain takes "
                    "lsaBarrierCount, not barrierCount (whose hybrid barriers need GIN)."),
    "railed": ("FULL GIN connections on a communicator an earlier device communicator connected RAIL",
               "Create the device communicator that needs NCCL_GIN_CONNECTION_FULL first, or ask every device "
               "communicator of that communicator for the same connection type."),
    "barrier": ("a world GIN barrier over RAIL connections",
                "A worldGinBarrierCount needs NCCL_GIN_CONNECTION_FULL: ask for it, or use railGinBarrierCount."),
    "exclusive": ("more exclusive GIN contexts than are left",
                  "Ask for fewer GIN contexts per device communicator (ginContextCount), share them "
                  "(ginExclusiveContexts false, NCCL_GIN_EXCLUSIVE_CONTEXTS unset), or raise NCCL_GIN_NCONTEXTS."),
    "shared": ("shared GIN contexts where exclusive ones took them all",
               "Leave contexts to share: fewer exclusive contexts in the earlier device communicators, or a larger "
               "NCCL_GIN_NCONTEXTS."),
}
_SYM_CHECK = re.compile(
    r"Coll (?P<coll>\S+) size (?P<size>[0-9]+) symmetric registration check failed on rank (?P<rank>[0-9]+): "
    r"(?P<what>sendReg|(?:send|recv) buffer (?:window|user offset))")
_ELASTIC = re.compile(
    r"Elastic GIN: rank (?P<rank>[0-9]+) (?:has [0-9]+ segments but another rank has|segment [0-9]+ size [0-9]+ "
    r"differs from rank (?P<other>[0-9]+) segment)")
_WHAT = {"sendReg": "one registered a buffer as a symmetric window and another did not",
         "send buffer window": "the send buffers lie in different windows",
         "recv buffer window": "the receive buffers lie in different windows",
         "send buffer user offset": "the send buffers start at different offsets in their window",
         "recv buffer user offset": "the receive buffers start at different offsets in their window"}


def _gin(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _GIN)
    if not found:
        return []
    lines = [line for line, _ in found]
    kinds = {k for _, m in found for k, v in m.groupdict().items() if v and k != "dev"}
    why: list[str] = []
    fix: list[str] = []
    if "disabled" in kinds:
        why.append("NCCL_GIN_ENABLE=0 turned it off")
        fix.append("Unset NCCL_GIN_ENABLE (or set it to 1) in the job and the container image.")
    if "absent" in kinds or "ranks" in kinds:
        why.append("no GIN plugin came up for the communicator" if "absent" in kinds
                   else "some ranks have no GIN")
        fix.append("On every node: NICs with a GIN backend (InfiniBand/RoCE ConnectX with GDAKI or the proxy, or an "
                   "external net plugin that exports GIN, such as aws-ofi-nccl 1.21 or later on EFA), a GPU of "
                   "compute capability 7.0 or newer, NCCL_GIN_TYPE unset or naming a backend the node has, and "
                   "NCCL_DEBUG_SUBSYS=INIT,NET to see `GIN/Plugin:` lines say which plugin was assigned.")
    if "nodev" in kinds:
        why.append("the GIN plugin found no device it can use")
        fix.append("`ibv_devices`/`ibstat` show the NICs Active inside the job's container (the RDMA devices "
                   "passed through), and NCCL_IB_HCA does not exclude them.")
    if "gdr" in kinds:
        why.append("the NIC cannot reach GPU memory: no nvidia-peermem and no DMA-BUF on the GPU")
        fix.append("Load nvidia_peermem (`lsmod | grep nvidia_peermem`) or use DMA-BUF (open GPU kernel modules, a "
                   "5.12+ kernel, rdma-core 44+).")
    if "rail" in kinds:
        why.append("it asked for full GIN connectivity where the network offers only rail-local connections")
        fix.append("Ask for NCCL_GIN_CONNECTION_RAIL in the device communicator's requirements, or give NCCL "
                   "cross-rail connectivity (NCCL_CROSS_NIC not 0).")
    where = hosts(lines)
    return [Cause(
        id="gin-unavailable", title="GPU-initiated networking (GIN) was asked for and is not available",
        detail=f"The program asked NCCL{' on ' + ', '.join(where) if where else ''} for GIN (a device communicator "
               "with GIN, device-API kernels or symmetric windows across nodes) and the call failed: "
               f"{'; '.join(why)}. A job that does not ask for GIN never prints these lines.",
        fix=" ".join(fix) + " A framework's option to run without GIN (its GIN or device-API switch) confirms it.",
        score=80, hosts=where, evidence=evidence(lines), settings=["NCCL_GIN_ENABLE", "NCCL_GIN_TYPE"],
    )]


def _gin_ask(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _GIN_ASK)
    if not found:
        return []
    lines = [line for line, _ in found]
    kinds = unique([k for _, m in found for k, v in m.groupdict().items() if v])
    where = hosts(lines)
    return [Cause(
        id="gin-request-refused", title=f"a device communicator asked for GIN in a way NCCL refuses: "
        f"{_GIN_ASK_SAY[kinds[0]][0]}",
        detail=f"NCCL{' on ' + ', '.join(where) if where else ''} refused the GPU-initiated networking (GIN) "
               "requirements the program gave a device communicator (ncclDevCommCreate) before connecting "
               f"anything: {'; '.join(_GIN_ASK_SAY[k][0] for k in kinds)}. The call returned an error. This is the "
               "program's request (or a GIN setting), not the node or the network: whether GIN is available "
               "was never tried.",
        fix=" ".join(_GIN_ASK_SAY[k][1] for k in kinds) + " The framework's device-API or GIN options set these "
            "requirements: an NCCL release other than the one the program was written for may count them "
            "differently.",
        score=76, hosts=where, evidence=evidence(lines),
        settings=[s for s in ("NCCL_GIN_NCONTEXTS", "NCCL_GIN_EXCLUSIVE_CONTEXTS")
                  if {"exclusive", "shared"} & set(kinds)],
    )]


def _mismatch(logs: list[Log]) -> list[Cause]:
    sym = grep(logs, _SYM_CHECK)
    elastic = grep(logs, _ELASTIC)
    if not sym and not elastic:
        return []
    lines = [line for line, _ in sym + elastic]
    ranks = unique(["0", *(m["rank"] for _, m in sym),
                    *(r for _, m in elastic for r in (m["rank"], m["other"]) if r)])
    said = unique([f"{m['coll']} of {m['size']} elements: {_WHAT[m['what']]}" for _, m in sym])
    if elastic:
        said.append("Elastic GIN buffers of a different number or size of segments")
    return [Cause(
        id="symmetric-registration-mismatch",
        title=f"ranks {', '.join(ranks)} registered their symmetric buffers differently",
        detail=f"NCCL compared the buffers the ranks passed and they differ ({'; '.join(said)}). Symmetric memory "
               "needs every rank to register the same buffers, of the same size, in the same order, and to pass "
               "the same offsets into them: this is the program, not the node or the network.",
        fix=f"Check the program on ranks {', '.join(ranks)}: register each window collectively with one size on "
            "every rank (ncclCommWindowRegister / the framework's symmetric tensors allocated in the same order), "
            "pass buffers at the same offset, and for Elastic GIN allocate the host-backed buffers alike on every "
            "rank. NCCL_CHECK_MODE=DEBUG_GLOBAL runs this check; leave it off in production.",
        score=78, hosts=hosts(lines), evidence=evidence(lines), settings=["NCCL_CHECK_MODE"],
    )]


def symmetric(logs: list[Log]) -> list[Cause]:
    return _gin(logs) + _gin_ask(logs) + _mismatch(logs)
