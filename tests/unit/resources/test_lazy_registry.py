"""The registry imports a kind's module when a play first names the kind: an audit of one kind loads that
kind's module and parsers only. Each case runs in a fresh interpreter, whose modules are its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from provisioner.resources import REGISTRY

PACKAGE_ROOT = Path(__file__).resolve().parents[3]


def _run(code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=PACKAGE_ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout))


def test_looking_up_a_kind_imports_that_kind_only(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("[gpu]\ngpu01 ansible_host=10.0.0.1\n")
    (tmp_path / "mtu.yml").write_text("- hosts: gpu\n  resources:\n    - interface: {name: eth1, mtu: 9000}\n")
    found = _run(f"""
        import json, sys
        from provisioner.load.hostplans import validate
        errors = validate({str(tmp_path / 'hosts')!r}, {str(tmp_path / 'mtu.yml')!r})
        loaded = sorted(m for m in sys.modules if m.startswith(("provisioner.resources.", "provisioner.parsers.")))
        print(json.dumps({{"errors": [e.message for e in errors], "loaded": loaded}}))
    """)
    loaded = found["loaded"]
    assert isinstance(loaded, list)
    assert found["errors"] == []
    assert "provisioner.resources.interface" in loaded
    # Not the other kinds, nor the remedy, nor the parsers only they use.
    for module in ("roce_qos", "roce_fix", "interface_fix", "port_counters", "nccl", "file", "service"):
        assert f"provisioner.resources.{module}" not in loaded
    for parser in ("mlnx_qos", "ibv_devinfo", "ethtool_stats", "port_counters", "dcb"):
        assert f"provisioner.parsers.{parser}" not in loaded


def test_an_unknown_kind_lists_every_kind(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("[gpu]\ngpu01 ansible_host=10.0.0.1\n")
    (tmp_path / "bad.yml").write_text("- hosts: gpu\n  resources:\n    - interfaces: {name: eth1}\n")
    found = _run(f"""
        import json
        from provisioner.load.hostplans import validate
        print(json.dumps({{"errors": [e.message for e in validate({str(tmp_path / 'hosts')!r},
                                                                  {str(tmp_path / 'bad.yml')!r})]}}))
    """)
    [message] = found["errors"]
    assert isinstance(message, str)
    assert "unknown resource kind 'interfaces'" in message
    assert "did you mean 'interface'" in message
    assert message.count(", ") >= len(REGISTRY) - 1
    for kind in REGISTRY:
        assert kind in message


def test_the_remedy_is_imported_when_asked_for() -> None:
    found = _run("""
        import json, sys
        from provisioner.resources import REGISTRY
        rtype = REGISTRY["roce_qos"]
        before = "provisioner.resources.roce_fix" in sys.modules
        from provisioner.resources import roce_fix
        print(json.dumps({"before": before, "same": rtype.remedy is not None and rtype.kind == "roce_qos"}))
    """)
    assert found == {"before": False, "same": True}


def test_every_module_named_like_a_kind_defines_it() -> None:
    kinds = list(REGISTRY)
    assert kinds == sorted(kinds)
    for kind in kinds:
        assert REGISTRY[kind].kind == kind
        assert REGISTRY[kind].evaluate.__module__ == f"provisioner.resources.{kind}"


def test_a_built_in_kind_taken_away_stays_away_until_registered_again() -> None:
    found = _run("""
        import json
        from provisioner.resources import REGISTRY, register, unregister
        kept = REGISTRY["ofed"]
        unregister("ofed")
        gone = ["ofed" in REGISTRY, "ofed" in list(REGISTRY)]
        unregister("sysctl")  # never looked up before: not loaded afterwards either
        gone += ["sysctl" in REGISTRY, "sysctl" in list(REGISTRY)]
        register(kept)
        print(json.dumps({"gone": gone, "back": REGISTRY["ofed"] is kept}))
    """)
    assert found == {"gone": [False, False, False, False], "back": True}
