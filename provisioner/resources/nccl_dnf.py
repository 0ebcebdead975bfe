"""nccl on dnf hosts: the probe's shell for `rpm -q` and dnf's versionlock files, and which files those are.

dnf 4's versionlock plugin reads its list from the `locklist` of `[main]` in its conf, wherever a site
points it; dnf 5 has one fixed file (libdnf5's VERSIONLOCK_CONF_FILENAME), and yum's list sits beside yum.
"""

from __future__ import annotations

import shlex

from provisioner.resources.base import Probe, sh

# What `rpm -q` answers from: the database in either of its places (rpm 4.16 moved it).
RPM_READS = ("/var/lib/rpm", "/var/lib/rpm/*", "/usr/lib/sysimage/rpm", "/usr/lib/sysimage/rpm/*")
# dnf 4's plugin conf, and the list it names when there is no conf to read (the packaged default).
LOCK_CONF = "/etc/dnf/plugins/versionlock.conf"
DEFAULT_LIST = "/etc/dnf/plugins/versionlock.list"
YUM_LIST = "/etc/yum/pluginconf.d/versionlock.list"
LOCK_TOML = "/etc/dnf/versionlock.toml"
_RPM_FORMAT = "%|EPOCH?{%{EPOCH}}:{0}|:%{VERSION}-%{RELEASE} %{ARCH}\\n"

# The value of `locklist` in `[main]`, read as libdnf's IniParser reads the conf (dnf's Plugin.read_config):
# a comment or blank line only at column 0 (`#` or `;`; none after a value), the key up to `=` with its
# trailing blanks, the value from the first non-blank with its trailing blanks and `\r` off, a line
# starting with a blank continuing the value (joined by a line break), trailing line breaks dropped, and
# one pair of matching quotes around it removed; the last `locklist` wins. Nothing printed: `[main]` sets
# none, and the plugin has no list.
_CONF_AWK = (
    "/^$/ || /^[#;]/ { k = 0; next } "
    '/^[ \\t\\r]*$/ { if (k == 2) v = v "\\n"; next } '
    '/^[ \\t\\r]*\\[/ { k = 0; t = $0; sub(/^[ \\t\\r]*\\[/, "", t); i = index(t, "]"); '
    "if (i > 1) s = substr(t, 1, i - 1); next } "
    '/^[ \\t\\r]/ { if (k == 2) { t = $0; sub(/^[ \\t\\r]+/, "", t); sub(/[ \\t\\r]+$/, "", t); v = v "\\n" t } next } '
    '{ i = index($0, "="); if (i < 2) { k = 0; next } key = substr($0, 1, i - 1); sub(/[ \\t]+$/, "", key); '
    't = substr($0, i + 1); sub(/^[ \\t]+/, "", t); sub(/[ \\t\\r]+$/, "", t); k = 1; '
    'if (s == "main" && key == "locklist") { v = t; set = 1; k = 2 } } '
    'END { sub(/\\n+$/, "", v); n = length(v); q = substr(v, 1, 1); '
    'if (n > 1 && q == substr(v, n, 1) && (q == "\\"" || q == "\\047")) v = substr(v, 2, n - 2); '
    "if (set) print v }"
)


def locklist_command() -> str:
    """Shell printing the list dnf 4's plugin reads: the conf's `locklist`, the default where there is no
    conf file to read. One command text, used both to read the list and to name it in the probe's reads."""
    conf = shlex.quote(LOCK_CONF)
    return (f"if [ -f {conf} ] && [ -r {conf} ]; then awk {shlex.quote(_CONF_AWK)} {conf}; "
            f"else echo {shlex.quote(DEFAULT_LIST)}; fi")


def lock_files(locklist: str | None) -> tuple[str, ...]:
    """The files `dnf versionlock` may edit on a host whose probe read `locklist` (None: not read, the
    default): the list the conf names where it is an absolute path, yum's list and dnf 5's TOML."""
    named = locklist if locklist is not None and locklist.startswith("/") else DEFAULT_LIST
    return tuple(dict.fromkeys((named, YUM_LIST, LOCK_TOML)))


def rpm_probe(package: str, files: str, reads: list[str]) -> Probe:
    """`rpm EPOCH:VERSION-RELEASE ARCH` per installed package (or the library listing `files`), then
    `locklist PATH` (the list dnf 4 reads, empty where the conf sets none), `lock LINE` for each line of
    that list and yum's that names the package, and `toml LINE` for each of dnf 5's file. All in the
    shell: no process per line. A relative list is not read: dnf reads it from whatever directory it runs in."""
    query = sh("rpm", "-q", "--qf", _RPM_FORMAT, package)
    named = f"*{shlex.quote(package)}*"
    lines = "while IFS= read -r l || [ -n \"$l\" ]; do"
    locklist = locklist_command()
    toml = shlex.quote(LOCK_TOML)
    command = (
        # `rpm -q` prints "package X is not installed" on stdout and fails: only a success is a package.
        f"if s=$({query} 2>/dev/null); then printf 'rpm %s %s\\n' $s; else {files}; fi; "
        f"ll=$({locklist}); printf 'locklist %s\\n' \"$ll\"; "
        f"for f in \"$ll\" {shlex.quote(YUM_LIST)}; do case $f in /*) if [ -r \"$f\" ]; then {lines} "
        f"case $l in {named}) printf 'lock %s\\n' \"$l\";; esac; done < \"$f\"; fi;; esac; done; "
        f"if [ -r {toml} ]; then {lines} printf 'toml %s\\n' \"$l\"; done < {toml}; fi"
    )
    # The list the conf names is known only on the host: its word is the same lookup, expanded there.
    words = (*RPM_READS, shlex.quote(LOCK_CONF), f'"$({locklist})"', shlex.quote(YUM_LIST), toml, *reads)
    return Probe(command, reads=words)
