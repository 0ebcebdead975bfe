"""`file`: a file's content, mode, owner and group.

Content never goes into a Check's desired/actual (those end up in reports and logs): both show a
sha256 prefix and the size. A short diff goes into the message, except for binary content and for
sensitive files (see sensitive.py: by path, by either side's content, or `sensitive: true`), whose
message gives only line counts. A secret-bearing file (by its path, its desired content or the flag)
without a `mode` in the playbook is wanted at 0600, not 0644.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import shlex

from provisioner.load.specs import FileSpec
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    drift,
    error,
    errors_for,
    ok,
    stdout_of,
)
from provisioner.resources.sensitive import (
    SECRET_MODE,
    fingerprint,
    sensitive_content,
    sensitive_path,
)
from provisioner.resources.steps import PHASE_FILES, Expect, Step, command_step, file_step, impossible, text_diff

KIND = "file"


def _probe(spec: FileSpec, ctx: HostContext | None = None) -> Probe:
    path = shlex.quote(spec.path)
    # Files of the kernel's and the driver's own (their status says nothing of their content) are read
    # every time; any other's output is decided by the file and the names of its owner and group.
    virtual = ("/proc/", "/sys/", "/dev/", *((ctx.sysfs_root.rstrip("/") + "/",) if ctx is not None else ()))
    reads = () if spec.path.startswith(virtual) else (path, "/etc/passwd", "/etc/group")
    # `stat -L` and `base64 <` follow a symlink, as writing the file through it would.
    return Probe(
        f"if [ -e {path} ]; then stat -L -c 'stat %a %u %U %g %G %F' -- {path} && echo content && "
        f"{{ if [ -f {path} ]; then base64 < {path}; fi; }}; else echo missing; fi",
        reads=reads,
    )


def probes(spec: FileSpec, ctx: HostContext) -> list[Probe]:
    return [_probe(spec, ctx)]


def is_sensitive(spec: FileSpec, *contents: bytes | None) -> bool:
    """Whether reports must show only hashes and line counts of this file's content."""
    return (spec.sensitive or sensitive_path(spec.path)
            or any(data is not None and sensitive_content(data) for data in contents))


def wanted_mode(spec: FileSpec) -> str:
    """The playbook's `mode`; where it gives none, 0600 for a secret-bearing file (judged by the desired
    content only, so the mode does not change once the file is written) and the default otherwise."""
    if "mode" in spec.model_fields_set:
        return spec.mode
    want = spec.content.encode() if spec.content is not None else None
    return SECRET_MODE if is_sensitive(spec, want) else spec.mode


def _diff(spec: FileSpec, have: bytes, want: bytes) -> str:
    return text_diff(spec.path, have, want, sensitive=is_sensitive(spec, have, want))


def _owner(wanted: str, uid: str, name: str) -> tuple[bool, str]:
    """Whether the owner (or group) matches `wanted`, a name or a numeric id; and how to show it."""
    shown = name if name != "UNKNOWN" else uid
    return (uid == wanted if wanted.isdigit() else name == wanted), shown


def evaluate(spec: FileSpec, results: Results, ctx: HostContext) -> list[Check]:
    want = spec.content.encode() if spec.content is not None else None
    desired_content = fingerprint(want) if want is not None else "rendered template"
    wanted = wanted_mode(spec)
    attributes: list[tuple[str, object]] = [
        ("content", desired_content), ("mode", wanted), ("owner", spec.owner), ("group", spec.group),
    ]
    try:
        text = stdout_of(results, _probe(spec), f"reading {spec.path}")
    except ProbeFailed as exc:
        return errors_for(attributes, str(exc))
    lines = text.splitlines()
    if lines[:1] == ["missing"]:
        return [drift("present", "present", "missing", f"{spec.path} does not exist")]
    head = lines[0].split(maxsplit=6) if lines else []
    if len(head) != 7 or head[0] != "stat" or "content" not in lines[1:2]:
        return errors_for(attributes, f"reading {spec.path}: unexpected output {(lines or [''])[0]!r}")
    _, mode, uid, user, gid, group, file_type = head
    if not file_type.startswith("regular"):
        return [drift("present", "regular file", file_type, f"{spec.path} is a {file_type}")]
    try:
        have = base64.b64decode("".join(lines[2:]), validate=True)
    except binascii.Error as exc:
        return errors_for(attributes, f"reading {spec.path}: content is not base64: {exc}")

    checks: list[Check] = []
    if want is None:
        checks.append(error("content", desired_content, "the template was not rendered for this host"))
    elif have == want:
        checks.append(ok("content", desired_content, fingerprint(have)))
    else:
        checks.append(drift("content", desired_content, fingerprint(have), _diff(spec, have, want)))
    same_mode = mode.isdigit() and int(mode, 8) == int(wanted, 8)
    checks.append((ok if same_mode else drift)("mode", wanted, mode.zfill(4)))
    owner_ok, owner_shown = _owner(spec.owner, uid, user)
    checks.append((ok if owner_ok else drift)("owner", spec.owner, owner_shown))
    group_ok, group_shown = _owner(spec.group, gid, group)
    checks.append((ok if group_ok else drift)("group", spec.group, group_shown))
    return checks


# ---------------------------------------------------------------------------------------------- remedy


def _read_content(spec: FileSpec, results: Results) -> tuple[Expect, ...]:
    """What the write must find under the host lock: the content read (or no file). Nothing for a
    path that was not a regular file: that write replaces whatever is there, as before."""
    lines = stdout_of(results, _probe(spec), f"reading {spec.path}").splitlines()
    if lines[:1] == ["missing"]:
        return (Expect.file(spec.path, None),)
    head = lines[0].split(maxsplit=6) if lines else []
    if len(head) != 7 or not head[6].startswith("regular") or "content" not in lines[1:2]:
        return ()
    return (Expect.file(spec.path, base64.b64decode("".join(lines[2:]))),)


def remedy(spec: FileSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """The whole file written atomically when it is missing or its content differs; else chmod / chown.
    The write runs only if the file still holds what was read (or is still missing)."""
    target = spec.target()
    drifted = {c.attribute: c for c in checks if c.status == "drift"}
    if not drifted:
        return []
    notify = tuple(spec.notify)
    if spec.content is None:
        return [impossible(target, "render", "the template was not rendered for this host")]
    want = spec.content.encode()
    mode = wanted_mode(spec)
    if "present" in drifted or "content" in drifted:
        # Both diffs come from _diff, which shows only hashes and line counts of sensitive content.
        diff = None
        if "content" in drifted:
            diff = drifted["content"].message
        elif drifted["present"].actual == "missing":
            diff = _diff(spec, b"", want)
        step = file_step(target, "write", spec.path, want, mode=mode, owner=spec.owner, group=spec.group,
                         notify=notify, diff=diff)
        return [dataclasses.replace(step, expect=_read_content(spec, results))]
    steps: list[Step] = []
    if "owner" in drifted or "group" in drifted:
        old = f"{drifted['owner'].actual if 'owner' in drifted else spec.owner}:" \
              f"{drifted['group'].actual if 'group' in drifted else spec.group}"
        steps.append(command_step(target, "chown", ("chown", "--", f"{spec.owner}:{spec.group}", spec.path),
                                  undo=["chown", "--", old, spec.path], phase=PHASE_FILES, notify=notify))
    if "mode" in drifted:
        old_mode = drifted["mode"].actual or mode
        steps.append(command_step(target, "chmod", ("chmod", "--", mode, spec.path),
                                  undo=["chmod", "--", old_mode, spec.path], phase=PHASE_FILES, notify=notify))
    return steps


RESOURCE = ResourceType(KIND, FileSpec, probes, evaluate, remedy=remedy, examples=(
    {"path": "/etc/nccl.conf", "content": "NCCL_IB_GID_INDEX=3\n", "mode": "0644", "owner": "root", "group": "root",
     "notify": ["nccl-exporter"]},
    {"path": "/etc/fabnet/fabric.env", "template": "fabric.env.j2", "mode": "0600", "sensitive": True},
))
