"""Kernel and firmware fault lines of an HCA (mlx5_core health reports, firmware syndromes, fatal
events) that people paste together with ibv_devinfo or ibstat output. They have a `key: value` shape
(`mlx5_core 0000:3b:00.0: health compromised`) but are errors, never attributes of a port."""

from __future__ import annotations

import re

FAULT = re.compile(
    r"health compromised|firmware internal error|FW fatal|fw_fatal|fatal error \d+ detected|device's health|"
    r"internal error.*syndrome|health.*syndrome|\bsyndrome\s*(?:0x[0-9a-f]+|\()|assert_var\[|"
    r"local catastrophic error|pci_channel_io_perm_failure|"
    r"^(?:\[\s*[0-9]+\.[0-9]+\]\s*)?(?:mlx[45]_core|mlx[45]_ib|ib_core)\b",
    re.IGNORECASE,
)


def is_fault(text: str) -> bool:
    """True for a kernel/firmware fault line of an HCA (not part of the tool's own output)."""
    return bool(FAULT.search(text.strip()))
