"""The port's netdev or RDMA device, looked up on the host inside a probe's shell (roce_qos and its remedies).

A spec names the netdev or the RDMA device; the other one is found first in sysfs, where the PCI function
behind the netdev lists its RDMA device (the shell's own glob, no program started), then with `rdma link
show` and `ibdev2netdev` for netdevs sysfs does not tie to one device (bonds, a function with several).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from provisioner.load.specs import RoceQosSpec
from provisioner.resources.base import sh

PORT = 1  # RoCE NICs have one port per device

# awk programs reading `rdma link show` / `ibdev2netdev` lines; the names they look for come in through
# the environment, so no value is ever pasted into program text.
_NETDEV_OF_DEVICE = '{for (i = 3; i < NF; i++) if ($i == "netdev") {print $(i + 1); exit}}'
_NETDEV_OF_DEVICE_IBDEV = '$1 == ENVIRON["FABNET_RDMA_DEV"] && $3 == "1" {print $5; exit}'
_DEVICE_OF_NETDEV = (
    '{for (i = 3; i < NF; i++) if ($i == "netdev" && $(i + 1) == ENVIRON["FABNET_NETDEV"])'
    ' {sub("/.*", "", $2); print $2; exit}}'
)
_DEVICE_OF_NETDEV_IBDEV = '$5 == ENVIRON["FABNET_NETDEV"] {print $1; exit}'


class Var(str):
    """A shell word that expands a variable the probe set itself; the only text left unquoted."""


NETDEV_VAR = Var('"$netdev"')
DEVICE_VAR = Var('"$dev"')


def _from_sysfs(var: str, directory: str) -> str:
    """Shell setting `var` to the one entry of `directory` (a glob of the shell's own: no program), or to
    nothing when it has none or several."""
    return (f"{var}=; for __fn_rd in {shlex.quote(directory)}/*; do "
            f'[ -d "$__fn_rd" ] || continue; '
            f'if [ -z "${var}" ]; then {var}=${{__fn_rd##*/}}; else {var}=; break; fi; done; ')


def with_netdev(spec: RoceQosSpec, command: Callable[[str], str], sysfs_root: str) -> str:
    """`command(netdev)`, where `netdev` is the spec's name or the `"$netdev"` the snippet looks up."""
    if spec.interface is not None:
        return command(spec.interface)
    device = spec.rdma_device
    assert device is not None
    port = shlex.quote(f"{device}/{PORT}")
    return (
        _from_sysfs("netdev", f"{sysfs_root}/class/infiniband/{device}/device/net")
        + f'[ -n "$netdev" ] || netdev=$(rdma link show {port} 2>/dev/null | awk {shlex.quote(_NETDEV_OF_DEVICE)}); '
        f'[ -n "$netdev" ] || netdev=$(ibdev2netdev 2>/dev/null | FABNET_RDMA_DEV={shlex.quote(device)} '
        f"awk {shlex.quote(_NETDEV_OF_DEVICE_IBDEV)}); "
        f'if [ -z "$netdev" ]; then echo {sh("no netdev found for RDMA device", device)} >&2; exit 1; fi; '
        + command(NETDEV_VAR)
    )


def with_device(spec: RoceQosSpec, command: Callable[[str], str], sysfs_root: str) -> str:
    """`command(dev)`, where `dev` is the spec's device or the `"$dev"` the snippet looks up."""
    if spec.rdma_device is not None:
        return command(spec.rdma_device)
    netdev = spec.interface
    assert netdev is not None
    env = f"FABNET_NETDEV={shlex.quote(netdev)}"
    return (
        _from_sysfs("dev", f"{sysfs_root}/class/net/{netdev}/device/infiniband")
        + f'[ -n "$dev" ] || dev=$(rdma link show 2>/dev/null | {env} awk {shlex.quote(_DEVICE_OF_NETDEV)}); '
        f'[ -n "$dev" ] || dev=$(ibdev2netdev 2>/dev/null | {env} awk {shlex.quote(_DEVICE_OF_NETDEV_IBDEV)}); '
        f'if [ -z "$dev" ]; then echo {sh("no RDMA device found for netdev", netdev)} >&2; exit 1; fi; '
        + command(DEVICE_VAR)
    )


def word(*pieces: str) -> str:
    """One shell word from pieces: text is quoted, the probe's own `"$var"` words are kept as they are."""
    return "".join(p if isinstance(p, Var) else shlex.quote(p) for p in pieces)
