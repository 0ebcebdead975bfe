"""The lab's stand-in for a site's OFED installer, for `fabnet_ofed_install_command`.

A real site runs its own installer (mlnxofedinstall, a DOCA repository, an image rebuild). On a lab
node the emulated `ofed_info` reads the version from the node's emulation state, so "installing" the
release the lab's fleet uses means writing it there, atomically, as the other emulated tools do.
"""

from __future__ import annotations

import shlex

LAB_RELEASE = "MLNX_OFED_LINUX-23.10-1.1.9.0"
HW_FILE = "/var/lib/fabnet-lab/hw.json"

_PROGRAM = (
    "import json, os, sys\n"
    "path, release = sys.argv[1], sys.argv[2]\n"
    "with open(path) as handle:\n"
    "    state = json.load(handle)\n"
    "state['ofed'] = release\n"
    "tmp = path + '.fabnet-ofed'\n"
    "with open(tmp, 'w') as handle:\n"
    "    json.dump(state, handle, indent=2)\n"
    "    handle.flush()\n"
    "    os.fsync(handle.fileno())\n"
    "os.replace(tmp, path)\n"
    "print('installed', release)\n"
)

# The value a lab inventory gives fabnet_ofed_install_command.
INSTALL_COMMAND = " ".join(shlex.quote(p) for p in ("python3", "-c", _PROGRAM, HW_FILE, LAB_RELEASE))
