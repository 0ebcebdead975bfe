"""sudo for what runs on hosts (`ansible_become`): the exec's command line, what goes before the script on
its standard input, and what a failed sudo means. Pure: nothing here runs anything.

Without a password sudo is non-interactive (`-n`): a prompt would hang the exec. With one, sudo reads it
from standard input (`-S`, empty prompt) and the script follows on the same stream:

    PASSWORD \\n MARKER \\n SCRIPT

sudo reads a password one byte at a time up to the newline, and only when it asks for one: with NOPASSWD
or a cached credential it reads nothing. So the shell sudo starts skips lines until the per-exec marker
(the password line, when sudo left it there) and only then reads the script: the password is never run,
and it is on no command line, so never in the host's process list. A wrong password makes sudo try the
next lines (the marker, the script's first ones) as passwords and give up; nothing of the script runs.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.load.inventory import Host

ENV_VAR = "FABNET_BECOME_PASSWORD"
ASK_OPTION = "-K (--ask-become-pass)"
NO_MARKER_EXIT = 125  # the shell under sudo saw no marker: the stream was not what fabnet sends


class Secret:
    """A password that never shows: not in repr, str, f-strings or tracebacks; `reveal()` is explicit.

    Refused up front when it could not travel as one line: a newline would end it early (the rest would
    reach the shell as a script line) and sudo stops at a NUL.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("the sudo password is empty")
        if any(c in value for c in "\n\r\0"):
            raise ValueError("the sudo password holds a newline or NUL character, which sudo cannot read")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:  # never pickled into a file or another process by accident
        raise TypeError("a Secret cannot be pickled")

    def __copy__(self) -> Secret:  # immutable: copies (dataclasses.asdict, deepcopy) share it
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self


def _marker() -> str:
    return "fabnet-become-" + secrets.token_hex(8)


@dataclass(frozen=True)
class Become:
    """How one exec becomes `user`. `forward_ssh` hands SSH_CONNECTION over as FABNET_SSH (sudo resets
    the environment; apply's script needs it to find the management path)."""

    user: str
    password: Secret | None = None
    forward_ssh: bool = False
    marker: str = field(default_factory=_marker)

    def command(self) -> str:
        """The exec's command line: a shell reading the script from standard input, as `user`.

        sudo runs in the C locale (`env`, whatever the login shell): its refusals are recognised by their
        English words (`failure`), and a node whose login environment sets another language (pam_env,
        /etc/default/locale) would have it print translated ones."""
        env = ' env "FABNET_SSH=$SSH_CONNECTION"' if self.forward_ssh else ""
        if self.password is None:
            return _quoted("env", "LC_ALL=C", "sudo", "-n", "-H", "-u", self.user, "--") + env + " sh -s"
        skip = (f'while IFS= read -r l; do [ "$l" = {self.marker} ] && exec sh -s; done; '
                f"echo 'fabnet: the script did not arrive after the sudo password' >&2; exit {NO_MARKER_EXIT}")
        return (_quoted("env", "LC_ALL=C", "sudo", "-S", "-p", "", "-H", "-u", self.user, "--") + env
                + " sh -c " + shlex.quote(skip))

    def stdin_prefix(self) -> bytes:
        """What goes on standard input before the script."""
        if self.password is None:
            return b""
        return (self.password.reveal() + "\n" + self.marker + "\n").encode()


def _quoted(*parts: str) -> str:
    return " ".join(shlex.quote(p) for p in parts)


def for_host(host: Host, password: Secret | None, *, forward_ssh: bool = False) -> Become | None:
    """The become of one exec on `host`, or None where the inventory does not ask for one."""
    if not host.become:
        return None
    return Become(host.become_user, password, forward_ssh)


def failure(become: Become, exit_code: int, stdout: str, stderr: str) -> str | None:
    """Why sudo itself refused to run the script, in words to act on; None when the script ran.

    sudo exits 1 before anything of the script ran (so nothing on stdout); its messages are matched as
    sudo prints them in the C locale, which `command` sets for it.
    """
    if exit_code != 1 or stdout.strip():
        return None
    if "incorrect password attempt" in stderr:
        return f"sudo refused the password (to become {become.user}); check {ENV_VAR} or what was typed at -K"
    if "a password is required" in stderr or "no password was provided" in stderr:
        return (f"sudo needs a password on this host (to become {become.user}): set {ENV_VAR} or pass "
                f"{ASK_OPTION}")
    if "is not in the sudoers file" in stderr or "is not allowed to" in stderr:
        return f"sudo does not allow the login user to run commands as {become.user} on this host"
    return None
