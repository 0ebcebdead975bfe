"""Recorded tool outputs and the runner the resource tests share: spec + outputs -> checks.

Outputs are keyed by a fragment of the command a probe finally runs (after any netdev or device
lookup), so a case names "mlnx_qos -i" or "traffic_class" rather than a whole command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.load.specs import Spec
from provisioner.resources import REGISTRY
from provisioner.resources.base import Check, HostContext, Probe, ProbeResult, Results
from provisioner.resources.steps import Step

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CTX = HostContext("gpu01")


def sample(name: str) -> str:
    """A recorded output exactly as stored (CRLF line endings stay)."""
    return (SAMPLES / name).read_bytes().decode("utf-8")


def failed(stderr: str, exit_code: int = 1, stdout: str = "") -> ProbeResult:
    return ProbeResult(stdout, stderr, exit_code)


NOT_FOUND = ProbeResult("", "sh: 1: tool: not found", 127)


# `ip -j -d link show`: lo and eth0 as captured on a build VM; the two ConnectX ports in the same shape.
IP_LINK = (
    '[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"qdisc":"noqueue",'
    '"operstate":"UNKNOWN","linkmode":"DEFAULT","group":"default","txqlen":1000,"link_type":"loopback",'
    '"address":"00:00:00:00:00:00","broadcast":"00:00:00:00:00:00","promiscuity":0,"allmulti":0,"min_mtu":0,'
    '"max_mtu":0,"inet6_addr_gen_mode":"eui64","num_tx_queues":1,"num_rx_queues":1,"gso_max_size":65536,'
    '"gso_max_segs":65535,"tso_max_size":524280,"tso_max_segs":65535,"gro_max_size":65536},'
    '{"ifindex":4,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1400,'
    '"qdisc":"pfifo_fast","operstate":"UP","linkmode":"DEFAULT","group":"default","txqlen":1000,'
    '"link_type":"ether","address":"02:fc:00:00:00:01","broadcast":"ff:ff:ff:ff:ff:ff","promiscuity":0,'
    '"allmulti":0,"min_mtu":68,"max_mtu":65535,"inet6_addr_gen_mode":"eui64","num_tx_queues":1,'
    '"num_rx_queues":1,"gso_max_size":65536,"gso_max_segs":65535,"tso_max_size":65536,"tso_max_segs":65535,'
    '"gro_max_size":65536,"parentbus":"virtio","parentdev":"virtio2"},'
    '{"ifindex":6,"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000,"qdisc":"mq",'
    '"operstate":"UP","linkmode":"DEFAULT","group":"default","txqlen":1000,"link_type":"ether",'
    '"address":"58:a2:e1:2a:09:b8","broadcast":"ff:ff:ff:ff:ff:ff","promiscuity":0,"allmulti":0,"min_mtu":68,'
    '"max_mtu":9978,"inet6_addr_gen_mode":"eui64","num_tx_queues":128,"num_rx_queues":128,'
    '"gso_max_size":65536,"gso_max_segs":65535,"tso_max_size":524280,"tso_max_segs":65535,'
    '"gro_max_size":65536,"parentbus":"pci","parentdev":"0000:0c:00.0","altnames":["enp12s0f0np0"]},'
    '{"ifindex":7,"ifname":"enp4s0f0np0","flags":["NO-CARRIER","BROADCAST","MULTICAST","UP"],"mtu":1500,'
    '"qdisc":"mq","operstate":"DOWN","linkmode":"DEFAULT","group":"default","txqlen":1000,"link_type":"ether",'
    '"address":"b8:ce:f6:3e:1d:40","broadcast":"ff:ff:ff:ff:ff:ff","promiscuity":0,"allmulti":0,"min_mtu":68,'
    '"max_mtu":9978,"inet6_addr_gen_mode":"eui64","num_tx_queues":64,"num_rx_queues":64,'
    '"gso_max_size":65536,"gso_max_segs":65535,"tso_max_size":524280,"tso_max_segs":65535,'
    '"gro_max_size":65536,"parentbus":"pci","parentdev":"0000:04:00.0"},'
    '{"ifindex":8,"ifname":"enp4s0f1np1","flags":["BROADCAST","MULTICAST"],"mtu":1500,"qdisc":"mq",'
    '"operstate":"DOWN","linkmode":"DEFAULT","group":"default","txqlen":1000,"link_type":"ether",'
    '"address":"b8:ce:f6:3e:1d:41","broadcast":"ff:ff:ff:ff:ff:ff","promiscuity":0,"allmulti":0,"min_mtu":68,'
    '"max_mtu":9978,"inet6_addr_gen_mode":"eui64","num_tx_queues":64,"num_rx_queues":64,'
    '"gso_max_size":65536,"gso_max_segs":65535,"tso_max_size":524280,"tso_max_segs":65535,'
    '"gro_max_size":65536,"parentbus":"pci","parentdev":"0000:04:00.1"}]\n'
)

# lsmod of a lab node (the RDMA and GPU modules are the lab's) with two host modules below them.
LSMOD = """\
Module                  Size  Used by
mlx5_core            2437120  1 mlx5_ib
ib_core               491520  5 mlx5_ib,ib_uverbs,ib_umad,rdma_cm,rdma_ucm
mlx5_ib               495616  0
ib_uverbs             196608  1 rdma_ucm
ib_umad                45056  0
rdma_cm               147456  1 rdma_ucm
rdma_ucm               36864  0
nvidia              56705024  1 nvidia_uvm
nvidia_uvm           1794048  0
overlay               151552  0
br_netfilter           32768  0
"""

NETWORKD_DATA = "[Match]\nName=eth1\n\n[Link]\nMTUBytes=9000\n\n[Network]\nAddress=192.0.2.2/24\n"


def listing(files: Mapping[str, str | None]) -> str:
    """What the config-file probes print for `files` (None: the file exists but cannot be read)."""
    parts = []
    for path, text in files.items():
        parts.append(f"==! {path} <==\n" if text is None else f"==> {path} <==\n{text}\n")
    return "".join(parts)


def final_command(probe: Probe) -> str:
    """The command a probe finally runs, after any lookup of `$netdev` / `$dev`."""
    if probe.command.startswith(("netdev=", "dev=")):
        return probe.command.rsplit("; fi; ", 1)[-1]
    return probe.command


@dataclass
class Run:
    probes: list[Probe]
    checks: list[Check]
    results: Results | None = None
    spec: Any = None

    def by_attribute(self) -> dict[str, Check]:
        return {check.attribute: check for check in self.checks}

    def summary(self) -> list[tuple[str, str, str, str | None]]:
        return [(c.attribute, c.status, c.desired, c.actual) for c in self.checks]


def run(kind: str, spec: Mapping[str, Any] | Spec, outputs: Mapping[str, str | ProbeResult | None],
        ctx: HostContext = CTX) -> Run:
    """Evaluate `spec` against recorded outputs. Every probe must match exactly one key of `outputs`,
    and every key must be used: a case also pins down which probes a spec needs. A value of None
    leaves the probe without a result (it did not run). A `Spec` instance is used as it is (built
    with `model_construct`, it bypasses the name checks, to test the resource's own defences)."""
    model = spec if isinstance(spec, Spec) else REGISTRY[kind].spec.model_validate(dict(spec))
    rtype = REGISTRY[kind]
    probes = list(rtype.probes(model, ctx))
    by_key: dict[str, ProbeResult] = {}
    used: set[str] = set()
    for probe in probes:
        command = final_command(probe)
        keys = [key for key in outputs if key in command]
        assert len(keys) == 1, f"probe {command!r} matches {keys} of {list(outputs)}"
        used.add(keys[0])
        value = outputs[keys[0]]
        if value is None:
            continue
        by_key[probe.key] = value if isinstance(value, ProbeResult) else ProbeResult(value, "", 0)
    assert used == set(outputs), f"outputs never probed: {sorted(set(outputs) - used)}"
    results = Results(by_key)
    return Run(probes, rtype.evaluate(model, results, ctx), results, model)


def fix(kind: str, spec: Mapping[str, Any], outputs: Mapping[str, str | ProbeResult | None],
        ctx: HostContext = CTX) -> list[Step]:
    """The remedy steps for `spec` on a host whose probes printed `outputs` (evaluated first, as apply does)."""
    evaluated = run(kind, spec, outputs, ctx)
    remedy = REGISTRY[kind].remedy
    assert remedy is not None, f"{kind} has no remedy"
    return remedy(evaluated.spec, evaluated.results, ctx, evaluated.checks)
