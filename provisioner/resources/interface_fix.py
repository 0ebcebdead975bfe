"""`interface` remedies: `ip link set` now, and the MTU persisted in the backend the node already uses.

The file to edit is the one that configures the netdev in its own backend (netplan, systemd-networkd,
NetworkManager keyfile, ifcfg, ifupdown), found by the same rules the audit reads them with. Only
where no file configures the netdev is one added, in the backend whose files the node already has
(systemd-networkd when it has none), so there is never a second, conflicting source.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import yaml

from provisioner.errors import ParseError
from provisioner.load.specs import InterfaceSpec
from provisioner.parsers.boot_mtu import (
    IFCFG_DIR,
    IFUPDOWN_FILE,
    IFUPDOWN_STANZAS,
    IP_LINK_MTU,
    NETPLAN_DIR,
    NETPLAN_SECTIONS,
    NETWORKD_DIR,
    NM_DIR,
    ini,
    networkd,
    persistent_mtu,
    shell_vars,
)
from provisioner.resources import interface
from provisioner.resources.base import (
    Check,
    HostContext,
    ProbeFailed,
    Results,
    parse_file_listing,
    sh,
    stdout_of,
)
from provisioner.resources.interface import BOOT_CONFIG, NoNetdev, netdev_of
from provisioner.resources.steps import (
    PHASE_NETWORK,
    Expect,
    Step,
    command_step,
    impossible,
    rewrite_step,
    setting_undo,
)

# ----------------------------------------------------------------------------------- text edits (pure)


def ini_set(text: str, section: str, key: str, value: str) -> str:
    """`text` of an INI-style file with `key=value` in `[section]` (replaced where present, else added)."""
    lines = text.splitlines()
    current = None
    section_end: int | None = None
    replaced = False
    for index, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        if current == section:
            if line and line[0] not in "#;":
                section_end = index + 1
            name = line.partition("=")[0].strip()
            if line and line[0] not in "#;" and "=" in line and name == key:
                lines[index] = f"{key}={value}"
                replaced = True
        if current == section and section_end is None:
            section_end = index + 1
    if not replaced:
        if section_end is not None:
            lines.insert(section_end, f"{key}={value}")
        else:
            while lines and not lines[-1].strip():
                lines.pop()
            lines += ["", f"[{section}]", f"{key}={value}"] if lines else [f"[{section}]", f"{key}={value}"]
    return "\n".join(lines) + "\n"


def shell_var_set(text: str, key: str, value: str) -> str:
    """ifcfg: `KEY=value` replaced, or appended."""
    pattern = re.compile(rf"^(\s*){re.escape(key)}=.*$", re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(lambda m: f"{m[1]}{key}={value}", text)
    return (text if text.endswith("\n") or not text else text + "\n") + f"{key}={value}\n"


def ifupdown_set_mtu(text: str, netdev: str, mtu: int) -> str | None:
    """/etc/network/interfaces with the `iface NETDEV` stanza's MTU set; None when there is no stanza."""
    lines = text.splitlines()
    stanza: list[int] = []
    current = None
    for index, raw in enumerate(lines):
        words = raw.split("#", 1)[0].split()
        if words and (words[0] in IFUPDOWN_STANZAS or words[0].startswith("allow-")):
            current = words[1] if words[0] == "iface" and len(words) > 1 else None
            if current == netdev:
                stanza.append(index)
            continue
        if current == netdev and words:
            stanza.append(index)
    if not stanza:
        return None
    for index in stanza[1:]:
        words = lines[index].split()
        if words[0] == "mtu":
            lines[index] = re.sub(r"mtu\s+\S+", f"mtu {mtu}", lines[index], count=1)
            return "\n".join(lines) + "\n"
        hook = IP_LINK_MTU.search(lines[index])
        if words[0] in ("up", "post-up", "pre-up") and hook and hook["dev"] == netdev:
            lines[index] = lines[index][: hook.start("mtu")] + str(mtu) + lines[index][hook.end("mtu"):]
            return "\n".join(lines) + "\n"
    indent = "    "
    if len(stanza) > 1:
        body = lines[stanza[1]]
        indent = body[: len(body) - len(body.lstrip())] or indent
    lines.insert(stanza[0] + 1, f"{indent}mtu {mtu}")
    return "\n".join(lines) + "\n"


def netplan_set_mtu(text: str, netdev: str, mtu: int) -> str | None:
    """A netplan file with the MTU set on the device definition for `netdev`; None when it has none.

    The file is edited as text where the YAML nodes lie (the value of an `mtu:` key replaced, or one line
    added to the device's block), so the admin's comments, order and layout stay; only a definition that
    text edit cannot place (an anchor, a merge key) is written back through a YAML round trip."""
    doc = yaml.safe_load(text) or {}
    network = doc.get("network") if isinstance(doc, dict) else None
    if not isinstance(network, dict):
        return None
    for section in NETPLAN_SECTIONS:
        devices = network.get(section)
        if not isinstance(devices, dict):
            continue
        for ident, conf in devices.items():
            conf = conf if isinstance(conf, dict) else {}
            match = conf.get("match") if isinstance(conf.get("match"), dict) else None
            applies = (conf.get("set-name") == netdev or (match or {}).get("name") == netdev) if match \
                else str(ident) == netdev
            if applies:
                conf["mtu"] = mtu
                devices[ident] = conf
                edited = _netplan_text_edit(text, section, str(ident), mtu)
                if edited is not None and yaml.safe_load(edited) == doc:
                    return edited
                return yaml.safe_dump(doc, default_flow_style=False, sort_keys=False)
    return None


def _child(node: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The (key, value) nodes of `key` in a mapping node (the last one, as the loader keeps it)."""
    if not isinstance(node, yaml.MappingNode):
        return None
    found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
    return found[-1] if found else None


def _netplan_text_edit(text: str, section: str, ident: str, mtu: int) -> str | None:
    """`text` with `mtu: N` set on network.SECTION.IDENT by a text edit, or None where it cannot be placed."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    path = _child(root, "network")
    path = _child(path[1], section) if path else None
    device = _child(path[1], ident) if path else None
    if device is None:
        return None
    key, conf = device
    if isinstance(conf, yaml.MappingNode):
        existing = _child(conf, "mtu")
        if existing is not None:  # replace the value where it stands
            value = existing[1]
            return text[: value.start_mark.index] + str(mtu) + text[value.end_mark.index:]
        if conf.flow_style:  # `eth1: {dhcp4: true}` -> `{dhcp4: true, mtu: N}`
            close = conf.end_mark.index - 1
            if text[close] != "}":
                return None
            joiner = ", " if conf.value else ""
            return text[:close] + f"{joiner}mtu: {mtu}" + text[close:]
        if not conf.value:
            return None
        first: yaml.Node = conf.value[0][0]
        line_start = text.rfind("\n", 0, first.start_mark.index) + 1
        indent = " " * int(first.start_mark.column)
        return text[:line_start] + indent + f"mtu: {mtu}\n" + text[line_start:]
    if isinstance(conf, yaml.ScalarNode) and conf.tag.endswith(":null") and conf.value == "":
        # `eth1:` with nothing under it: a block of its own, indented one step past the key.
        line_end = text.find("\n", key.end_mark.index)
        line_end = len(text) if line_end < 0 else line_end
        step = _indent_step(text)
        return text[:line_end] + "\n" + " " * (key.start_mark.column + step) + f"mtu: {mtu}" + text[line_end:]
    return None


def _indent_step(text: str) -> int:
    """The file's indentation step: the smallest indent of a line that is not a comment (2 if none)."""
    widths = [len(line) - len(line.lstrip(" ")) for line in text.splitlines()
              if line.strip() and not line.lstrip().startswith("#") and line.startswith(" ")]
    return min(widths) if widths else 2


# ------------------------------------------------------------------------------- where the MTU goes


def _nm_profile(files: dict[str, str], netdev: str) -> str | None:
    for path in sorted(p for p in files if p.startswith(NM_DIR)):
        values = {(s, k): v for s, k, v in ini(files[path])}
        if values.get(("connection", "interface-name")) == netdev and \
                values.get(("connection", "autoconnect"), "true").lower() not in ("false", "no", "0"):
            return path
    return None


def _nm_section(text: str) -> str:
    sections = {s for s, _k, _v in ini(text)} | set(re.findall(r"^\s*\[([^\]]+)\]", text, re.MULTILINE))
    for name in ("ethernet", "802-3-ethernet", "infiniband"):
        if name in sections:
            return name
    return "infiniband" if "type=infiniband" in text else "ethernet"


def _ifcfg_file(files: dict[str, str], netdev: str) -> str | None:
    for path in sorted(p for p in files if p.startswith(IFCFG_DIR + "ifcfg-")):
        if (shell_vars(files[path]).get("DEVICE") or path.rsplit("ifcfg-", 1)[-1]) == netdev:
            return path
    return None


def persist_edit(files: dict[str, str], netdev: str, mtu: int) -> tuple[str, str]:
    """(path, new text): the boot-time config change that gives `netdev` this MTU. Pure.

    The file that already sets its MTU is edited; else the file that configures the netdev in its
    backend; else a new file in the backend the node uses.
    """
    _, source = persistent_mtu(files, netdev)
    candidates: list[str] = [source] if source else []
    netplan_files = sorted((p for p in files if p.startswith(NETPLAN_DIR)), key=lambda p: p.rsplit("/", 1)[-1])
    candidates += list(reversed(netplan_files))  # the last file defining the device wins the merge
    network = networkd(files, netdev, ".network", "Link")
    candidates += [network[1]] if network else []
    candidates += [p for p in (_nm_profile(files, netdev), _ifcfg_file(files, netdev)) if p]
    candidates += [p for p in files if p == IFUPDOWN_FILE or p.startswith(IFUPDOWN_FILE + ".d/")]
    for path in candidates:
        text = files[path]
        edited: str | None
        if path.startswith(NETPLAN_DIR):
            edited = netplan_set_mtu(text, netdev, mtu)
        elif path.startswith(NETWORKD_DIR):
            edited = ini_set(text, "Link", "MTUBytes", str(mtu))
        elif path.startswith(NM_DIR):
            edited = ini_set(text, _nm_section(text), "mtu", str(mtu))
        elif path.startswith(IFCFG_DIR):
            edited = shell_var_set(text, "MTU", str(mtu))
        else:
            edited = ifupdown_set_mtu(text, netdev, mtu)
        if edited is not None:
            return path, edited
    return new_config(files, netdev, mtu)


def new_config(files: dict[str, str], netdev: str, mtu: int) -> tuple[str, str]:
    """A file of its own for the backend whose files the node has (systemd-networkd if none)."""
    def has(prefix: str) -> bool:
        return any(p.startswith(prefix) for p in files)

    if has(NETPLAN_DIR):
        doc = {"network": {"version": 2, "ethernets": {netdev: {"mtu": mtu}}}}
        return f"{NETPLAN_DIR}90-fabnet-{netdev}.yaml", yaml.safe_dump(doc, default_flow_style=False)
    if has(NM_DIR):
        return (f"{NM_DIR}fabnet-{netdev}.nmconnection",
                f"[connection]\nid=fabnet-{netdev}\ntype=ethernet\ninterface-name={netdev}\n\n"
                f"[ethernet]\nmtu={mtu}\n\n[ipv4]\nmethod=disabled\n\n[ipv6]\nmethod=ignore\n")
    if has(IFCFG_DIR):
        return f"{IFCFG_DIR}ifcfg-{netdev}", f"DEVICE={netdev}\nONBOOT=yes\nBOOTPROTO=none\nMTU={mtu}\n"
    if IFUPDOWN_FILE in files and not has(NETWORKD_DIR):
        text = files[IFUPDOWN_FILE]
        return IFUPDOWN_FILE, (text if text.endswith("\n") or not text else text + "\n") + \
            f"\nallow-hotplug {netdev}\niface {netdev} inet manual\n    mtu {mtu}\n"
    return f"{NETWORKD_DIR}10-fabnet-{netdev}.network", f"[Match]\nName={netdev}\n\n[Link]\nMTUBytes={mtu}\n"


# ---------------------------------------------------------------------------------------------- remedy


def _mode_for(path: str) -> str | None:
    # netplan and NetworkManager refuse (or warn about) world-readable files; keep others' modes.
    return "0600" if path.startswith((NETPLAN_DIR, NM_DIR)) else None


def mtu_read(netdev: str) -> str:
    """Shell printing the live MTU of `netdev`, as `ip -j link` gives it to the probe."""
    return sh("ip", "-o", "link", "show", "dev", netdev) + r" | sed -n 's/.* mtu \([0-9][0-9]*\).*/\1/p'"


def link_read(netdev: str) -> str:
    """Shell printing `up` or `down`: whether `netdev` is administratively up (its UP flag), as the probe
    judges it."""
    return (sh("ip", "-o", "link", "show", "dev", netdev)
            + r" | sed -n 's/^[^<]*<\([^>]*\)>.*/,\1,/p' | grep -q ',UP,' && echo up || echo down")


def _bond(netdev: str, results: Results) -> str | None:
    try:
        link = interface.ip_links(results).get(netdev)
    except ProbeFailed:
        return None
    return interface.bond_of(link) if link is not None else None


def remedy(spec: InterfaceSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    target = spec.target()
    drifted = {c.attribute: c for c in checks if c.status == "drift"}
    if not drifted:
        return []
    try:
        netdev = netdev_of(spec.name, spec.rdma_device, results)
    except (ProbeFailed, NoNetdev) as exc:
        return [impossible(target, "find", str(exc), PHASE_NETWORK)]
    if netdev is None or any(c.actual == "absent" for c in drifted.values()):
        return [impossible(target, "find", f"no interface {netdev or spec.rdma_device} on this host", PHASE_NETWORK)]
    lockout = netdev in ctx.management_interfaces
    steps: list[Step] = []
    # Each runtime change runs only if the host still holds what was read (an administrator may have
    # set another MTU, or taken the link down, while apply waited at its prompt): never overwritten.
    bond = _bond(netdev, results)
    if "mtu" in drifted and spec.mtu is not None and bond is not None:
        # The kernel takes a member's own MTU, but the bond keeps its own and resets the members' at its next
        # change: the fix is the bond's MTU, which a spec on the bond sets.
        steps.append(impossible(target, "mtu", f"{netdev} is a member of bond {bond}: set the MTU on {bond}",
                                PHASE_NETWORK))
    elif "mtu" in drifted and spec.mtu is not None:
        old = drifted["mtu"].actual
        step = command_step(target, "mtu", ("ip", "link", "set", "dev", netdev, "mtu", str(spec.mtu)),
                            undo=["ip", "link", "set", "dev", netdev, "mtu", str(old)] if old else None,
                            phase=PHASE_NETWORK, lockout=lockout, netdev=netdev)
        if old:
            # Undone (by rollback or the revert timer) only while the MTU is still the one set, or the old one.
            name = f"the MTU of {netdev}"
            step = dataclasses.replace(step, expect=(Expect.setting(name, mtu_read(netdev), str(old)),),
                                       undo=setting_undo(name, mtu_read(netdev), str(spec.mtu), str(old),
                                                         step.undo or ""))
        steps.append(step)
    if "link" in drifted:
        back = "down" if spec.state == "up" else "up"
        step = command_step(target, "link", ("ip", "link", "set", "dev", netdev, spec.state),
                            undo=["ip", "link", "set", "dev", netdev, back], phase=PHASE_NETWORK,
                            lockout=lockout, netdev=netdev)
        name, was = f"the link of {netdev}", str(drifted["link"].actual or back)
        steps.append(dataclasses.replace(step, expect=(Expect.setting(name, link_read(netdev), was),),
                                         undo=setting_undo(name, link_read(netdev), spec.state, back,
                                                           step.undo or "")))
    if "mtu_persistent" in drifted and spec.mtu is not None and bond is not None:
        # The boot-time config gives the bond its MTU too (networkd, netplan and ifcfg set members from it).
        steps.append(impossible(target, "persist", f"{netdev} is a member of bond {bond}: persist the MTU on "
                                f"{bond}", PHASE_NETWORK))
    elif "mtu_persistent" in drifted and spec.mtu is not None:
        try:
            files: dict[str, Any] = parse_file_listing(stdout_of(results, BOOT_CONFIG, "network config")).files
            path, text = persist_edit(files, netdev, spec.mtu)
        except (ProbeFailed, ParseError, yaml.YAMLError) as exc:
            steps.append(impossible(target, "persist", f"cannot edit the boot-time config: {exc}", PHASE_NETWORK))
        else:
            steps.append(rewrite_step(target, "persist", path, text.encode(), files.get(path), phase=PHASE_NETWORK,
                                      mode=_mode_for(path)))
    return steps

