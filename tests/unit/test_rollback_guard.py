"""Rollback behind apply's management-path guard: apply's record beside each undo, and the rollback script
run for real by /bin/sh (fed as transport.run feeds it, the `armed` marker acknowledged or not), with
stand-ins for `ip route get` (the session arrives on eth0), systemd-run and systemctl."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from provisioner.apply import changes, confirmation, guard_shell, rollback
from provisioner.evaluate import engine
from provisioner.load.hostplans import HostPlan
from provisioner.load.inventory import Host
from provisioner.resources.steps import Expect, Step, file_step, setting_undo
from provisioner.run import transport
from provisioner.run.transport import framed
from tests.unit.acked import run_acked
from tests.unit.test_changes import HOLDER

RB = changes.Holder("20261123T000100Z-def", "ops@control", "2026-11-23T00:01:00Z")


@pytest.fixture
def node(host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-ins: `ip route get` says the session arrives on eth0; systemd-run arms (keeping the command
    it was given, for a test to fire) and systemctl records what it is asked."""
    bin_dir = host_dirs / "bin"
    bin_dir.mkdir()
    tools = {
        "ip": "case \"$*\" in *'route get'*) echo \"$4 dev eth0 src 10.0.0.2 uid 0\";; esac\n",
        "systemd-run": (f"while [ \"${{1#--}}\" != \"$1\" ]; do shift; done\n"
                        f"printf '%s\\0' \"$@\" > {host_dirs}/timer\n"),
        "systemctl": f"printf '%s\\n' \"$*\" >> {host_dirs}/systemctl.calls\n",
    }
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setattr(changes, "reverted_flag", lambda run_id: str(host_dirs / f"reverted-{run_id}"))
    monkeypatch.setattr(changes, "redo_list", lambda run_id: str(host_dirs / f"redo-{run_id}"))
    return host_dirs


def _env(host_dirs: Path, *, ssh: bool = True, systemd: bool = True) -> dict[str, str]:
    if not systemd:
        (host_dirs / "bin/systemd-run").unlink()
    env = {**os.environ, "PATH": f"{host_dirs}/bin:/usr/bin:/bin"}
    env.pop("SSH_CONNECTION", None)
    if ssh:
        env["FABNET_SSH"] = "10.0.0.1 50000 10.0.0.2 22"
    return env


def _setting(host_dirs: Path, netdev: str, name: str, old: str, new: str, **kw: object) -> Step:
    """A runtime link setting of `netdev` kept in a file, as interface_fix makes an MTU step."""
    value = host_dirs / f"{netdev}.{name}"
    value.write_text(old + "\n")
    read = f"cat {value}"
    what = f"the {name} of {netdev}"
    return Step(f"interface[{netdev}]", name, f"echo {new} > {value}", f"ip link set dev {netdev} {name} {new}",
                undo=setting_undo(what, read, new, old, f"echo {old} > {value}"), netdev=netdev,
                expect=(Expect.setting(what, read, old),), **kw)  # type: ignore[arg-type]


def _apply(host_dirs: Path, steps: list[Step]) -> None:
    script = changes.build_script(steps, "ap", HOLDER.run_id, "gpu01", HOLDER, revert_seconds=30)
    proc = run_acked(script, env=_env(host_dirs))
    assert [s.status for s in changes.parse_output(proc.stdout, "ap", len(steps)).steps] == ["ok"] * len(steps), \
        proc.stdout + proc.stderr
    (host_dirs / "timer").unlink(missing_ok=True)


def _rollback(env: dict[str, str], *, acked: bool = True, management: tuple[str, ...] = ()
              ) -> tuple[subprocess.CompletedProcess[str], list[rollback.UndoResult]]:
    script = rollback.build_script(HOLDER.run_id, "rb", RB, revert_seconds=30, host="gpu01", management=management)
    if acked:
        proc = run_acked(script, env=env)
    else:  # the input ends with the script, as when fabnet's side of the channel is gone
        proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30,
                              env=env)
    run, undone, problem = rollback.parse(proc.stdout, "rb")
    assert problem is None and run == HOLDER.run_id, proc.stdout + proc.stderr
    return proc, undone


def _run_dir(host_dirs: Path) -> Path:
    return host_dirs / "backups" / HOLDER.run_id


def _fire(host_dirs: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run((host_dirs / "timer").read_text().split("\0")[:-1], capture_output=True, text=True,
                          timeout=30, env=_env(host_dirs))


def test_apply_records_each_undos_device_and_the_re_do_of_a_link_step(node: Path) -> None:
    conf = node / "app.conf"
    conf.write_text("old\n")
    _apply(node, [_setting(node, "eth0", "mtu", "1400", "1500", lockout=True),
                  file_step("file[app]", "write", str(conf), b"new\n")])
    undo = (_run_dir(node) / "undo/0000").read_text().splitlines()
    assert undo[0].startswith("# interface[eth0]:mtu ") and undo[1] == "#@ netdev=eth0 lockout=1"
    assert (_run_dir(node) / "undo/0001").read_text().splitlines()[1] == "#@ netdev= lockout=0"
    assert not (_run_dir(node) / "redo/0001").exists()
    redo = _run_dir(node) / "redo/0000"
    # The re-do makes the change again only while the value is what the undo put back.
    (node / "eth0.mtu").write_text("1400\n")
    assert subprocess.run(["sh", "-e", str(redo)], capture_output=True, text=True).returncode == 0
    assert (node / "eth0.mtu").read_text() == "1500\n"
    (node / "eth0.mtu").write_text("4200\n")
    again = subprocess.run(["sh", "-e", str(redo)], capture_output=True, text=True)
    assert again.returncode != 0 and "changed since the rollback: not re-done" in again.stderr
    assert (node / "eth0.mtu").read_text() == "4200\n"


def test_an_undo_of_the_management_path_is_armed_and_its_revert_re_does_the_runs_link_changes(node: Path) -> None:
    _apply(node, [_setting(node, "eth1", "mtu", "1500", "9000"), _setting(node, "eth0", "mtu", "1400", "1500")])
    proc, undone = _rollback(_env(node))
    # Newest first: eth0's undo is armed (its marker before it), eth1's runs after it under the same timer.
    assert [(u.step, u.exit_code) for u in undone] == [("0001", 0), ("0000", 0)], proc.stdout
    assert proc.stdout.index("@@fabnet:rb:armed:0001@@") < proc.stdout.index("@@fabnet:rb:undo:0001:")
    assert proc.stdout.count(":armed:") == 1
    assert (node / "eth0.mtu").read_text() == "1400\n" and (node / "eth1.mtu").read_text() == "1500\n"
    assert not (_run_dir(node) / "undo").exists()  # all undone, for now
    assert not (node / "systemctl.calls").exists()  # acknowledged: the timer stays for the confirmation
    # No fresh connection confirmed it: the timer re-does both changes and puts their undos back.
    fired = _fire(node)
    assert fired.returncode == 0, fired.stderr
    assert (node / "eth0.mtu").read_text() == "1500\n" and (node / "eth1.mtu").read_text() == "9000\n"
    assert sorted(p.name for p in (_run_dir(node) / "undo").iterdir()) == ["0000", "0001"]
    assert (node / f"reverted-{RB.run_id}").exists() and not (node / f"redo-{RB.run_id}").exists()
    records = [json.loads(line) for line in (node / "log/journal.jsonl").read_text().splitlines()]
    revert = next(r for r in records if r["action"] == "revert")
    assert revert["run"] == RB.run_id and revert["host"] == "gpu01" and revert["resource"] == "management path"
    # A second rollback retries them: both undone again.
    _, again = _rollback(_env(node))
    assert [(u.step, u.exit_code) for u in again] == [("0001", 0), ("0000", 0)]
    assert (node / "eth0.mtu").read_text() == "1400\n"


def test_without_an_acknowledgement_the_undo_is_refused_kept_and_the_others_run(node: Path) -> None:
    _apply(node, [_setting(node, "eth1", "mtu", "1500", "9000"), _setting(node, "eth0", "mtu", "1400", "1500")])
    _, undone = _rollback(_env(node), acked=False)
    assert [(u.step, u.exit_code) for u in undone] == [("0001", guard_shell.NOT_ACKED), ("0000", 0)]
    assert "did not acknowledge the armed revert" in undone[0].output
    assert (node / "eth0.mtu").read_text() == "1500\n" and (node / "eth1.mtu").read_text() == "1500\n"
    assert [p.name for p in (_run_dir(node) / "undo").iterdir()] == ["0001"]
    assert (node / "systemctl.calls").read_text().split() == ["stop", f"{changes.revert_unit(RB.run_id)}.timer"]


def test_without_systemd_run_the_undo_is_refused_with_its_reason_and_kept_for_a_retry(node: Path) -> None:
    _apply(node, [_setting(node, "eth0", "mtu", "1400", "1500"), _setting(node, "eth1", "mtu", "1500", "9000")])
    proc, undone = _rollback(_env(node, systemd=False))
    assert [(u.step, u.exit_code) for u in undone] == [("0001", 0), ("0000", guard_shell.NOT_ARMED)]
    assert "no automatic revert could be armed (systemd-run)" in undone[1].output
    assert ":armed:" not in proc.stdout
    assert (node / "eth0.mtu").read_text() == "1500\n" and (node / "eth1.mtu").read_text() == "1500\n"
    assert [p.name for p in (_run_dir(node) / "undo").iterdir()] == ["0000"]
    assert not (node / f"redo-{RB.run_id}").exists()  # nothing armed: the list is gone too


def test_an_interface_the_inventory_names_is_guarded_where_the_session_arrives_elsewhere(node: Path) -> None:
    _apply(node, [_setting(node, "eth1", "mtu", "1500", "9000")])
    _, undone = _rollback(_env(node, ssh=False, systemd=False), management=("eth1",))
    assert [(u.step, u.exit_code) for u in undone] == [("0000", guard_shell.NOT_ARMED)]
    _, unguarded = _rollback(_env(node, ssh=False))
    assert [(u.step, u.exit_code) for u in unguarded] == [("0000", 0)]


def _legacy(host_dirs: Path, undo: str) -> None:
    """An undo as an older fabnet wrote it: its header, then the undo, no record line."""
    for sub in ("undo", "state"):
        (_run_dir(host_dirs) / sub).mkdir(parents=True, exist_ok=True)
    (_run_dir(host_dirs) / "undo/0000").write_text(f"# interface:link ip link set\n{undo}\n")
    (_run_dir(host_dirs) / "state/0000").write_text("ok\n")


def test_an_older_undo_naming_the_management_interface_is_refused_even_where_a_revert_could_be_armed(
        node: Path) -> None:
    # No record of how to re-do it: an armed revert could not put the path back, so it is never run.
    done = node / "done"
    _legacy(node, f"ip link set dev eth0 down; : > {done}")
    proc, undone = _rollback(_env(node))
    assert [(u.step, u.exit_code) for u in undone] == [("0000", guard_shell.NOT_REDOABLE)]
    assert "recorded by an older fabnet" in undone[0].output and ":armed:" not in proc.stdout
    assert not done.exists() and (_run_dir(node) / "undo/0000").exists()


def test_an_older_undo_of_another_interface_runs_as_before(node: Path) -> None:
    done = node / "done"
    _legacy(node, f": eth10 veth0 eth0x; : > {done}")  # eth0 not as a word of its own
    _, undone = _rollback(_env(node))
    assert [(u.step, u.exit_code) for u in undone] == [("0000", 0)] and done.exists()


# ----------------------------------------------------------- fabnet's side: confirm, or say it was lost


class _Session:
    """Runs the rollback script with /bin/sh as transport.run would, acknowledging the marker."""

    def __init__(self, env: dict[str, str], calls: list[dict[str, object]]) -> None:
        self.env, self.calls = env, calls

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def exec(self, script: str, **kw: object) -> transport.ExecResult:
        self.calls.append(kw)
        proc = run_acked(script, env=self.env)
        return transport.ExecResult(proc.stdout, proc.stderr, proc.returncode, 1.0, "exited", marked_at=0.5)


@pytest.mark.parametrize(("answer", "status"), [("confirmed", "rolled_back"), ("reverted", "failed"),
                                                ("unreachable", "unreachable")])
def test_an_armed_rollback_is_confirmed_by_a_fresh_connection_or_says_what_the_host_did(
        node: Path, monkeypatch: pytest.MonkeyPatch, answer: str, status: str) -> None:
    _apply(node, [_setting(node, "eth0", "mtu", "1400", "1500")])
    calls: list[dict[str, object]] = []
    confirmed: list[tuple[str, int]] = []
    monkeypatch.setattr(rollback, "open_session", lambda host, options: _Session(_env(node), calls))

    def confirm(host: Host, options: object, run_id: str, revert_seconds: int, armed_at: float
                ) -> tuple[str, int, float | None]:
        confirmed.append((run_id, revert_seconds))
        return answer, 1, 12.0 if answer == "reverted" else None

    monkeypatch.setattr(confirmation, "confirm", confirm)
    plan = HostPlan(Host("gpu01", "10.0.0.2", vars={"fabnet_management_interfaces": "eth9"}))
    back = rollback.rollback_host(plan, engine.Options(), HOLDER.run_id, RB, revert_seconds=20)
    mark, wait = calls[0]["shorten_after"]  # type: ignore[misc]
    assert calls[0]["forward_ssh"] is True and str(mark).endswith(":armed:") and wait == 10.0
    assert confirmed == [(RB.run_id, 20)] and back.armed and back.confirmation == answer
    assert back.status == status and back.rollback_id == RB.run_id
    if answer == "reverted":
        assert back.error is not None and "reverted the rollback on its own after 12 s" in back.error
        assert "could not be confirmed" in back.error  # the exec ended at once: the path held
    json_host = rollback.to_json([back])["hosts"][0]
    assert json_host["armed"] is True and json_host["confirmation"] == answer
