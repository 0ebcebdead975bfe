"""The fleet-wide MTU check of the benchmark's pyinfra deploy (fabnet's `mtu_uniform`).

pyinfra runs this file only after site.py has run for every host, so every host's MTU is known: the
most common one is the reference (a tie goes to the larger), as in fabnet.
"""

import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import labcheck as lc
from pyinfra import host

counts = Counter(mtu for mtu in lc.FLEET_MTU.values() if mtu is not None)
reference = max(counts, key=lambda mtu: (counts[mtu], mtu)) if counts else None
mine = lc.FLEET_MTU.get(host.name)
key = f"mtu_uniform[{host.data.data_iface}].mtu"
lc.check(name=f"check {key}", key=key, want=f"{reference} (fleet)", have=mine, ok=mine == reference)
