"""Run the real Ansible (ansible-core, a test extra) on an inventory: the oracle fabnet is compared with.

Everything Ansible writes goes under a temporary directory, and it runs from an empty working directory
with an empty config, so no ansible.cfg, group_vars/ or collection on this machine changes its answer.

Importing Ansible's command-line modules is most of a call's cost (0.6 s of 0.63 for a small inventory), and
the suite asks a few hundred questions. So each `ansible`, `ansible-inventory` or `ansible-playbook` runs as
that program's own `main()` in a child forked from one Python that has imported them and nothing else,
started once with the environment, working directory and hash seed every call gets: the child begins where
the installed script's process stands after its imports. `FABNET_ORACLE_FORK=0` runs the installed scripts
instead; a test compares the two.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from provisioner.load.ansible_tags import hide_passwords

BIN = Path(sys.executable).parent
TIMEOUT = 120.0

# The programs run forked, and the module whose main() each installed script calls.
_MAINS = {"ansible": "ansible.cli.adhoc", "ansible-inventory": "ansible.cli.inventory",
          "ansible-playbook": "ansible.cli.playbook"}

# The forking Python: one request (JSON) a line on its standard input, one exit status a line back.
_ZYGOTE = """
import importlib, json, os, sys
mains = {tool: importlib.import_module(module).main for tool, module in json.loads(sys.argv[1]).items()}
for line in sys.stdin:
    ask = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, name in ((1, ask["out"]), (2, ask["err"])):
                os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.stdin = open(os.devnull)
            sys.argv = [ask["argv0"], *ask["args"]]
            try:
                mains[ask["tool"]]()
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


def available() -> bool:
    return (BIN / "ansible-inventory").exists() and (BIN / "ansible-playbook").exists()


class Ansible:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "ansible.cfg"
        config.write_text("[defaults]\n")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            "LANG": "C.UTF-8",
            "ANSIBLE_CONFIG": str(config),
            "ANSIBLE_HOME": str(workdir / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1",
            # Ansible orders some hosts through a set (a host in several groups of one YAML inventory, as in
            # the goldentooth corpus): its `all` order then follows the string hash seed. One fixed seed
            # makes the oracle's answer one answer.
            "PYTHONHASHSEED": "0",
        }

        self._zygote: subprocess.Popen[str] | None = None
        self._calls = 0

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        if tool not in _MAINS or os.environ.get("FABNET_ORACLE_FORK") == "0":
            return subprocess.run([str(BIN / tool), *args], cwd=self.workdir, env=self.env, capture_output=True,
                                  text=True, timeout=TIMEOUT, check=False)
        if self._zygote is None or self._zygote.poll() is not None:
            self._zygote = subprocess.Popen(
                [sys.executable, "-c", _ZYGOTE, json.dumps(_MAINS)], cwd=self.workdir, env=self.env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        zygote = self._zygote
        assert zygote.stdin is not None and zygote.stdout is not None
        self._calls += 1
        out, err = self.workdir / f"call-{self._calls}.out", self.workdir / f"call-{self._calls}.err"
        ask = {"tool": tool, "argv0": str(BIN / tool), "args": list(args), "out": str(out), "err": str(err)}
        zygote.stdin.write(json.dumps(ask) + "\n")
        zygote.stdin.flush()
        ready, _, _ = select.select([zygote.stdout], [], [], TIMEOUT)
        if not ready:
            os.killpg(zygote.pid, signal.SIGKILL)  # the child and anything it started are in its group
            zygote.wait()
            raise subprocess.TimeoutExpired([tool, *args], TIMEOUT)
        answer = zygote.stdout.readline()
        assert answer.strip().lstrip("-").isdigit(), f"the forking Python of the oracle ended: {answer!r}"
        try:
            return subprocess.CompletedProcess([tool, *args], int(answer), out.read_text(), err.read_text())
        finally:
            out.unlink()
            err.unlink()

    @staticmethod
    def _sources(sources: Sequence[Path]) -> list[str]:
        return [arg for source in sources for arg in ("-i", str(source))]

    def inventory_list(self, sources: Sequence[Path], *extra: str) -> dict:
        done = self.run("ansible-inventory", *self._sources(sources), "--list", *extra)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        # fabnet hides plain passwords where ansible-inventory prints them: the one intended difference.
        for name, variables in data.get("_meta", {}).get("hostvars", {}).items():
            data["_meta"]["hostvars"][name] = hide_passwords(variables)
        return data

    def rendered(self, sources: Sequence[Path], names: Sequence[str],
                 hosts: Sequence[str] = ()) -> dict[str, dict[str, object]]:
        """Each host's variables `names` (of `hosts`, or all), rendered as Ansible renders them for a task
        (None where unset): an ad hoc `debug`, an action that runs on the controller and never connects,
        one line a host."""
        values = ", ".join(f"'{name}': {name} | default(none)" for name in names)
        # A task renders the become password too: one the inventory keeps in a vault (no secret here) is
        # replaced by an extra var, which outranks it and leaves the connection settings alone.
        done = self.run("ansible", *self._sources(sources), ",".join(hosts) or "all", "-o", "-f", "50",
                        "-m", "ansible.builtin.debug",
                        "-e", "ansible_become_pass=unused", "-e", "ansible_become_password=unused",
                        "-a", f'msg="{{{{ {{{values}}} | to_json }}}}"')
        found: dict[str, dict[str, object]] = {}
        for line in done.stdout.splitlines():
            host, sep, result = line.partition(" | SUCCESS => ")
            if sep:
                msg = json.loads(result)["msg"]
                found[host] = msg if isinstance(msg, dict) else json.loads(msg)
        assert found, done.stdout + done.stderr
        return found

    def list_hosts(self, sources: Sequence[Path], patterns: Sequence[str]) -> list[set[str] | None]:
        """Hosts each pattern selects, as `ansible-playbook --list-hosts` prints them for plays with
        `hosts: PATTERN` (a set: ansible-playbook prints them in no particular order); None where Ansible
        reports an error. One process for all patterns, one per pattern when one of them fails."""
        if not patterns:
            return []
        found = self._plays(sources, patterns)
        if found is not None:
            return [set(hosts) for hosts in found]
        if len(patterns) == 1:
            return [None]
        half = len(patterns) // 2  # find the failing plays without one process per pattern
        return self.list_hosts(sources, patterns[:half]) + self.list_hosts(sources, patterns[half:])

    def _plays(self, sources: Sequence[Path], patterns: Sequence[str]) -> list[list[str]] | None:
        playbook = self.workdir / "list-hosts.yml"
        playbook.write_text(json.dumps([{"hosts": p, "gather_facts": False, "tasks": []} for p in patterns]))
        done = self.run("ansible-playbook", *self._sources(sources), "--list-hosts", str(playbook))
        if done.returncode != 0:
            return None
        plays = _parse_list_hosts(done.stdout)
        assert len(plays) == len(patterns), done.stdout
        return plays

    def pattern_hosts(self, sources: Sequence[Path], pattern: str) -> list[str]:
        """`ansible PATTERN --list-hosts`: the hosts in the order Ansible resolves them."""
        done = self.run("ansible", pattern, *self._sources(sources), "--list-hosts")
        assert done.returncode == 0, done.stderr
        return [line.strip() for line in done.stdout.splitlines()[1:] if line.strip()]

    def limit_hosts(self, sources: Sequence[Path], limit: str) -> tuple[int, list[str], str]:
        """`ansible all --list-hosts --limit LIMIT`: exit code, hosts, stderr."""
        done = self.run("ansible", "all", *self._sources(sources), "--list-hosts", "--limit", limit)
        hosts = [line.strip() for line in done.stdout.splitlines()[1:] if line.strip()]
        return done.returncode, hosts, done.stderr


def _parse_list_hosts(stdout: str) -> list[list[str]]:
    """Each play's host list from `ansible-playbook --list-hosts` output."""
    plays: list[list[str]] = []
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        if re.match(r"\s+hosts \(\d+\):", line):
            hosts: list[str] = []
            for host in lines[index + 1 :]:
                if not host.strip():
                    break
                hosts.append(host.strip())
            plays.append(hosts)
    return plays


def cleanup(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
