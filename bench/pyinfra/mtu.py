"""Read-only pyinfra version of `fabnet audit -p bench/fabnet/mtu.yml`: live MTU and link state of the
data port, from one `ip -j -d link show` per host. The benchmark's per-round-trip comparison."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import labcheck as lc
from pyinfra import host

iface = host.data.data_iface
link = lc.link_of(lc.read("ip -j -d link show"), iface)
mtu = link.get("mtu")
state = "up" if "UP" in link.get("flags", []) else "down"
lc.check(name=f"check interface[{iface}].mtu", key=f"interface[{iface}].mtu", want=9000, have=mtu, ok=mtu == 9000)
lc.check(name=f"check interface[{iface}].link", key=f"interface[{iface}].link", want="up", have=state,
         ok=state == "up")
