"""An inventory host's connection settings (address, port, user, key, become) from its merged variables,
validated: every value that reaches ssh, an ssh_config `Match exec` line or a remote shell must be a plain
host name, IP address, user name, port or path, never something ssh or a shell could read as an option or
as syntax.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provisioner.errors import ConfigError
from provisioner.load.yamlsrc import Origin

# \w is Unicode: Ansible takes an internationalised name (`příbor`) as it is, and letters are no shell syntax.
_LABEL = r"(?!-)[\w-]{1,63}"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}\$?$")
_PATH_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f;&|$`<>(){}\[\]*?!'\"\\]")

CONNECTION_VARS = (
    "ansible_host", "ansible_ssh_host", "ansible_port", "ansible_ssh_port", "ansible_user", "ansible_ssh_user",
    "ansible_ssh_private_key_file", "ansible_private_key_file", "ansible_become", "ansible_become_user",
    "fabnet_known_hosts",
)


def check_address(value: Any, origin: Origin | None, what: str = "ansible_host") -> str:
    """A host name (RFC 1123 labels of letters of any script, digits, `-` and `_` as in practice) or an IP
    literal; anything else, above all shell syntax such as `10.0.0.1;touch${IFS}/tmp/x`, is an error
    (ssh_config `Match exec` would run it)."""
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text:
        try:
            ipaddress.ip_address(text.split("%", 1)[0] if re.fullmatch(r"[0-9A-Fa-f:.]+%[A-Za-z0-9_.-]+", text)
                                 else text)
            return text
        except ValueError:
            pass
        if len(text) <= 253 and _HOSTNAME.match(text):
            return text
    raise _error(origin, f"{what} must be a host name or an IP address, got {value!r}")


def check_user(value: Any, origin: Origin | None, what: str = "ansible_user") -> str:
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not _USER.match(text):
        raise _error(origin, f"{what} must be a user name (letters, digits, . _ - @; not starting with -), "
                             f"got {value!r}")
    return text


def check_port(value: Any, origin: Origin | None) -> int:
    if isinstance(value, bool):
        raise _error(origin, f"expected a port number 1..65535, got {value!r}")
    try:
        port = int(str(value).strip())
    except ValueError:
        raise _error(origin, f"expected a port number 1..65535, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise _error(origin, f"expected a port number 1..65535, got {port}")
    return port


def check_path(value: Any, origin: Origin | None, base: Path) -> Path:
    """A local file path: no control characters, no shell syntax, not starting with `-`."""
    if not isinstance(value, str) or not value.strip():
        raise _error(origin, f"expected a file path, got {value!r}")
    if value.startswith("-") or _PATH_FORBIDDEN.search(value):
        raise _error(origin, f"a file path may not start with '-' or hold control characters or shell syntax "
                             f"(;&|$`<>(){{}}[]*?!'\"\\), got {value!r}")
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else base / path


def check_boolean(value: Any, origin: Origin | None) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"yes", "true", "on", "1", "y", "t"}:
        return True
    if text in {"no", "false", "off", "0", "n", "f"}:
        return False
    raise _error(origin, f"expected true or false, got {value!r}")


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"


def _error(origin: Origin | None, message: str) -> ConfigError:
    return origin.error(message) if origin is not None else ConfigError(message)


def pick(values: Mapping[str, Any], *names: str) -> tuple[str, Any] | None:
    """The first of `names` set (not null) in `values`, with its name."""
    for name in names:
        if name in values and values[name] is not None:
            return name, values[name]
    return None


__all__ = ["CONNECTION_VARS", "check_address", "check_boolean", "check_path", "check_port", "check_user",
           "current_user", "pick"]
