"""HCA firmware/kernel fault text pasted with ibv_devinfo or ibstat output is an error, never a port
attribute (its `mlx5_core 0000:3b:00.0: ...` shape looks like `key: value`)."""

from __future__ import annotations

import pytest

from provisioner.parsers.ibstat import parse_ibstat
from provisioner.parsers.ibv_devinfo import parse_ibv_devinfo
from tests.unit.parsers._samples import read

FAULTS = [
    "mlx5_core 0000:3b:00.0: mlx5_health_try_recover: health compromised - reached miss count",
    "[ 812.331] mlx5_core 0000:3b:00.0: print_health_info: firmware internal error",
    "mlx5_core 0000:3b:00.0: FW fatal error, syndrome 0x8",
]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(("parse", "sample"), [(parse_ibv_devinfo, "ibv_devinfo-1.txt"),
                                                (parse_ibstat, "ibstat-1.txt")])
def test_fault_line_is_a_fault_not_an_attribute(parse, sample: str, fault: str) -> None:
    text = read(sample).rstrip("\n") + "\n\t\t\t" + fault + "\n"
    parsed = parse(text)
    assert [f.text.strip() for f in parsed.faults] == [fault]
    assert "0000" not in str(parsed.model_dump(exclude={"faults"}))
    assert parse(read(sample)).faults == []
