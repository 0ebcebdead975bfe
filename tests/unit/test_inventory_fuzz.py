"""Random and adversarial inventory text: fabnet either reads it or says what is wrong (ConfigError),
never a traceback or a hang."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.errors import ConfigError
from provisioner.load.hostpatterns import limit_terms, match_hosts
from provisioner.load.inventory import load_inventory

INI_PIECES = st.sampled_from([
    "[gpu]", "[gpu:vars]", "[gpu:children]", "[all:vars]", "[rack]", "[x:y]", "[", "]", "gpu01", "gpu[01:03]",
    "gpu[a:c]", "gpu[0:9:3]", "h:22", "[::1]:22", "10.0.0.1", "a=b", "mtu=9000", "x='q'", 'y="[1,2]"', "z={",
    "#", ";", " ", "\t", "---", "-o", "$(id)", "`id`", ";id", "\u00e9", "ansible_host=", "ansible_port=x",
    "ansible_user=-x", "rack", ":", "\\", "'", '"',
])
YAML_PIECES = st.sampled_from([
    "all:", "  hosts:", "    gpu01:", "  children:", "    gpu:", "      hosts:", "        gpu[01:02]:", "  vars:",
    "    mtu: 9000", "      ansible_host: 10.0.0.1", "      ansible_port: '22'", "- a", "{", "}", "[", "]",
    "&a", "*a", "<<: *a", "!vault |", "!unsafe x", "plugin: x", "1:", "null:", "    ? [a]", "  hosts: a b",
    "\t", "'", "ansible_user: '-x'", "    gpu01: [1]", "  hosts: [a]",
])


def _check(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        started = time.monotonic()
        try:
            inventory = load_inventory(path)
        except ConfigError:
            inventory = None
        assert time.monotonic() - started < 5
        if inventory is not None:
            for pattern in ("all", "gpu[0]", "~g", "gpu:!rack", "*"):
                try:
                    match_hosts(inventory, None, terms=limit_terms(pattern), warnings=[])
                except ConfigError:
                    pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(INI_PIECES, max_size=6).map(" ".join), max_size=12).map("\n".join))
def test_ini_like_text_loads_or_is_a_config_error(text: str) -> None:
    _check(text, "hosts")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(YAML_PIECES, max_size=14).map("\n".join))
def test_yaml_like_text_loads_or_is_a_config_error(text: str) -> None:
    _check(text, "hosts.yml")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_loads_or_is_a_config_error(text: str) -> None:
    _check(text, "inventory")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="gpu01[]:!&~,*?.-@ ^$()|\\", max_size=30))
def test_any_limit_selects_or_is_a_config_error(limit: str) -> None:
    from provisioner.load.inventory import Inventory

    inventory = Inventory(source=Path("x"), hosts={"gpu01": None, "gpu02": None}, groups={},  # type: ignore[dict-item]
                          group_order={"all": ["gpu01", "gpu02"], "ungrouped": [], "gpu": ["gpu01", "gpu02"]})
    try:
        match_hosts(inventory, None, terms=limit_terms(limit), warnings=[])
    except ConfigError:
        pass
