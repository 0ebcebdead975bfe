"""Which hosts a smoke run uses and what fabnet knows about each before touching it (pure).

From the inventory: the node's Python (`fabnet_python`, default python3), its data interfaces
(`fabnet_data_ifaces`, else `data_iface`, the variable playbooks/site.yml uses) and, when given,
its data address (`fabnet_data_ip` or `data_ip`). From the playbook: the NCCL environment the
play renders into /etc/nccl.conf or an /etc/profile.d script, which the ranks are started with, and
which of its values are secrets (as the file resource judges its content: a sensitive file, a
secret-sounding name, a value rendered from a password variable, a token-shaped value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.load.ansible_tags import secret_variable
from provisioner.load.devicevars import DATA_IFACE, DATA_IFACES, SYSFS_ROOT, iface_list
from provisioner.load.hostplans import HostPlan
from provisioner.load.inventory import Host
from provisioner.load.names import netdev
from provisioner.resources.sensitive import sensitive_content, sensitive_path
from provisioner.smoke.settings import AllReduceSpec

_ASSIGN = re.compile(r"^\s*(?:export\s+)?(?P<key>(?:NCCL|GLOO)_[A-Z0-9_]+)=(?P<value>.*?)\s*$")
ENV_FILES = re.compile(r"^(/etc/nccl\.conf|/etc/profile\.d/[^/]+\.sh|/etc/environment)$")


@dataclass(frozen=True)
class Target:
    name: str
    host: Host
    python: str = "python3"
    data_ifaces: tuple[str, ...] = ()
    data_ip: str | None = None
    sysfs_root: str = "/sys"
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: frozenset[str] = frozenset()  # keys of `env` whose values are never shown

    @property
    def data_iface(self) -> str | None:
        return self.data_ifaces[0] if self.data_ifaces else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    # An unrendered template is no use for addressing a host; the probe finds the real value instead.
    return text if text and "{{" not in text and "{%" not in text else None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_env_file(content: str) -> dict[str, str]:
    """NCCL_*/GLOO_* assignments of an nccl.conf (KEY=VALUE) or a shell profile (export KEY=VALUE)."""
    env: dict[str, str] = {}
    for line in content.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _ASSIGN.match(line)
        if match:
            env[match["key"]] = _unquote(match["value"])
    return env


def rendered_env(plan: HostPlan) -> tuple[dict[str, str], frozenset[str]]:
    """The NCCL environment the playbook renders for this host, and the keys whose values are secrets.
    Environment-variable files win over /etc/nccl.conf, as they do for NCCL itself."""
    conf: dict[str, str] = {}
    exported: dict[str, str] = {}
    secret: set[str] = set()
    for resource in plan.resources:
        if resource.kind != "file":
            continue
        path = str(getattr(resource.spec, "path", ""))
        content = getattr(resource.spec, "content", None)
        if not isinstance(content, str) or not ENV_FILES.match(path):
            continue
        found = parse_env_file(content)
        (conf if path == "/etc/nccl.conf" else exported).update(found)
        # `sensitive` is also set for content rendered from a password variable (hostplans).
        whole = bool(getattr(resource.spec, "sensitive", False)) or sensitive_path(path)
        secret |= {key for key, value in found.items()
                   if whole or secret_variable(key) or sensitive_content(f"{key}={value}".encode())}
    return {**conf, **exported}, frozenset(secret)


def _ifaces(vars: Mapping[str, Any], env: Mapping[str, str]) -> tuple[str, ...]:
    # The inventory's names were checked when it loaded (load/devicevars.py); unrendered ones are skipped.
    names = [n for n in (_text(v) for v in iface_list(vars.get(DATA_IFACES))) if n]
    if not names and (single := _text(vars.get(DATA_IFACE))):
        names = [single]
    if not names:
        # An exact NCCL_SOCKET_IFNAME (=eth1) or a plain one names the interface too. It comes from a
        # file's content, which no model checks: an entry that is no interface name is not used as one
        # (it would reach /sys/class/net/NAME and `ping -I`); the pre-flight's env check names it.
        socket = env.get("NCCL_SOCKET_IFNAME", "")
        if socket and not socket.startswith("^"):
            names = [n for n in socket.removeprefix("=").split(",") if n and _is_netdev(n)]
    return tuple(dict.fromkeys(names))


def _is_netdev(name: str) -> bool:
    try:
        netdev(name)
    except ValueError:
        return False
    return True


def targets_from_plans(plans: Sequence[HostPlan]) -> list[Target]:
    targets = []
    for plan in plans:
        host = plan.host
        env, secret = rendered_env(plan)
        targets.append(Target(
            name=host.name,
            host=host,
            python=_text(host.vars.get("fabnet_python")) or "python3",
            data_ifaces=_ifaces(host.vars, env),
            data_ip=_text(host.vars.get("fabnet_data_ip")) or _text(host.vars.get("data_ip")),
            sysfs_root=_text(host.vars.get(SYSFS_ROOT)) or "/sys",
            env=env,
            secret_env=secret,
        ))
    return targets


def verify_spec(plans: Sequence[HostPlan]) -> AllReduceSpec | None:
    """The first play's `verify: all_reduce:` settings among the targeted hosts' plays."""
    for plan in plans:
        for host_play in plan.plays:
            verify = host_play.play.verify
            if verify is not None and verify.all_reduce is not None:
                return verify.all_reduce
    return None
