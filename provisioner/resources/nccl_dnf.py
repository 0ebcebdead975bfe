"""nccl on dnf hosts: the probe's shell for `rpm -q` and dnf's versionlock files, and which files those are.

dnf 4's versionlock plugin reads its list from the `locklist` of `[main]` in its conf, wherever a site
points it; dnf 5 has one fixed file (libdnf5's VERSIONLOCK_CONF_FILENAME), and yum's list sits beside yum.
The plugin may be off (dnf.conf's `plugins`, its conf's `enabled`), its conf may sit in another folder
(dnf.conf's `pluginconfpath`), and the list it names may be missing: the probe says which (nccl_dnf_lock.py
judges it).
"""

from __future__ import annotations

import shlex

from provisioner.resources.base import Probe, sh

# What `rpm -q` answers from: the database in either of its places (rpm 4.16 moved it).
RPM_READS = ("/var/lib/rpm", "/var/lib/rpm/*", "/usr/lib/sysimage/rpm", "/usr/lib/sysimage/rpm/*")
# dnf 4's own conf (its `[main]` may switch plugins off or move their confs), the plugin's conf in the
# default folder of plugin confs (dnf.const.PLUGINCONFPATH), and the list it names when there is no conf to read
# (the packaged default).
DNF_CONF = "/etc/dnf/dnf.conf"
LOCK_CONF = "/etc/dnf/plugins/versionlock.conf"
DEFAULT_LIST = "/etc/dnf/plugins/versionlock.list"
YUM_LIST = "/etc/yum/pluginconf.d/versionlock.list"
LOCK_TOML = "/etc/dnf/versionlock.toml"
_RPM_FORMAT = "%|EPOCH?{%{EPOCH}}:{0}|:%{VERSION}-%{RELEASE} %{ARCH}\\n"

# The value of key `w` in `[main]`, read as libdnf's IniParser reads the conf (dnf's Plugin.read_config):
# a comment or blank line only at column 0 (`#` or `;`; none after a value), the key up to `=` with its
# trailing blanks, the value from the first non-blank with its trailing blanks and `\r` off, a line
# starting with a blank continuing the value (joined by a line break), trailing line breaks dropped, and
# one pair of matching quotes around it removed; the last one wins. Printed after `=` (a key set empty is
# not a key unset); nothing printed: `[main]` sets none.
_CONF_AWK = (
    "/^$/ || /^[#;]/ { k = 0; next } "
    '/^[ \\t\\r]*$/ { if (k == 2) v = v "\\n"; next } '
    '/^[ \\t\\r]*\\[/ { k = 0; t = $0; sub(/^[ \\t\\r]*\\[/, "", t); i = index(t, "]"); '
    "if (i > 1) s = substr(t, 1, i - 1); next } "
    '/^[ \\t\\r]/ { if (k == 2) { t = $0; sub(/^[ \\t\\r]+/, "", t); sub(/[ \\t\\r]+$/, "", t); v = v "\\n" t } next } '
    '{ i = index($0, "="); if (i < 2) { k = 0; next } key = substr($0, 1, i - 1); sub(/[ \\t]+$/, "", key); '
    't = substr($0, i + 1); sub(/^[ \\t]+/, "", t); sub(/[ \\t\\r]+$/, "", t); k = 1; '
    'if (s == "main" && key == w) { v = t; set = 1; k = 2 } } '
    'END { sub(/\\n+$/, "", v); n = length(v); q = substr(v, 1, 1); '
    'if (n > 1 && q == substr(v, n, 1) && (q == "\\"" || q == "\\047")) v = substr(v, 2, n - 2); '
    "if (set) print \"=\" v }"
)


# The shell reading them: `__fn_ini KEY FILE` prints `=VALUE` where FILE's `[main]` sets KEY.
_INI_FN = ('__fn_ini() { if [ -f "$2" ] && [ -r "$2" ]; then awk -v w="$1" '
           + shlex.quote(_CONF_AWK) + ' "$2"; fi; }')


def _conf_vars() -> str:
    """Shell setting "$pl" and "$pc", dnf.conf's `plugins` and `pluginconfpath` (`=VALUE`, empty where
    unset), and "$c", the plugin conf dnf reads: empty where `pluginconfpath` is not one absolute path of
    plain characters (libdnf splits it into several at blanks, commas and line breaks and reads the conf
    from each; which of them decides is not followed here)."""
    dnf_conf = shlex.quote(DNF_CONF)
    return (f"{_INI_FN}; pl=$(__fn_ini plugins {dnf_conf}); pc=$(__fn_ini pluginconfpath {dnf_conf}); "
            f"c={shlex.quote(LOCK_CONF)}; case $pc in '') ;; =/*) case ${{pc#=}} in *[![:alnum:]._/+@:-]*) c=;; "
            "*) c=${pc#=}/versionlock.conf;; esac;; *) c=;; esac")


def _list_from_vars() -> str:
    """Shell printing the list the conf "$c" names (nothing where it names none or "$c" is empty)."""
    return ('if [ -n "$c" ]; then if [ -f "$c" ] && [ -r "$c" ]; then x=$(__fn_ini locklist "$c"); '
            f"case $x in =*) printf '%s\\n' \"${{x#=}}\";; esac; else echo {shlex.quote(DEFAULT_LIST)}; fi; fi")


def locklist_command() -> str:
    """Shell printing the list dnf 4's plugin reads: the conf's `locklist`, the default where there is no
    conf file to read. One command text, used both to read the list and to name it in the probe's reads."""
    return f"{_conf_vars()}; {_list_from_vars()}"


def ensure_list(locklist: str | None) -> str:
    """Shell creating the list the conf names where it is missing (empty, 0644, its folder too): dnf's
    plugin opens it before anything else, so `dnf install` and `dnf versionlock add` both fail without it."""
    if locklist is None or not locklist.startswith("/"):
        return ""
    path = shlex.quote(locklist)
    folder = shlex.quote(locklist.rsplit("/", 1)[0] or "/")
    return f"if [ ! -e {path} ]; then mkdir -p -- {folder} && : >> {path} && chmod 0644 {path}; fi; "


def lock_files(locklist: str | None) -> tuple[str, ...]:
    """The files `dnf versionlock` may edit on a host whose probe read `locklist` (None: not read, the
    default): the list the conf names where it is an absolute path, yum's list and dnf 5's TOML."""
    named = locklist if locklist is not None and locklist.startswith("/") else DEFAULT_LIST
    return tuple(dict.fromkeys((named, YUM_LIST, LOCK_TOML)))


def rpm_probe(package: str, files: str, reads: list[str]) -> Probe:
    """`rpm EPOCH:VERSION-RELEASE ARCH` per installed package (or the library listing `files`), then
    `plugins VALUE` and `pluginconfpath VALUE` where dnf.conf sets them, `lockconf PATH` (the plugin conf
    read; empty where `pluginconfpath` is not followed), `enabled VALUE` where that conf sets it,
    `locklist PATH` (the list dnf 4 reads, empty where the conf sets none), `nolist` where that list is
    missing, `lock LINE` for each line of
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
        f"{_conf_vars()}; "
        "case $pl in =*) printf 'plugins %s\\n' \"${pl#=}\";; esac; "
        "case $pc in =*) printf 'pluginconfpath %s\\n' \"${pc#=}\";; esac; "
        "printf 'lockconf %s\\n' \"$c\"; en=; if [ -n \"$c\" ]; then en=$(__fn_ini enabled \"$c\"); fi; "
        "case $en in =*) printf 'enabled %s\\n' \"${en#=}\";; esac; "
        f"ll=$({_list_from_vars()}); printf 'locklist %s\\n' \"$ll\"; "
        'case $ll in /*) if [ ! -e "$ll" ]; then echo nolist; fi;; esac; '
        f"for f in \"$ll\" {shlex.quote(YUM_LIST)}; do case $f in /*) if [ -r \"$f\" ]; then {lines} "
        f"case $l in {named}) printf 'lock %s\\n' \"$l\";; esac; done < \"$f\"; fi;; esac; done; "
        f"if [ -r {toml} ]; then {lines} printf 'toml %s\\n' \"$l\"; done < {toml}; fi"
    )
    # The list the conf names is known only on the host: its word is the same lookup, expanded there.
    conf = f'"$({_conf_vars()}; echo "$c")"'
    words = (*RPM_READS, shlex.quote(DNF_CONF), shlex.quote(LOCK_CONF), conf, f'"$({locklist})"',
             shlex.quote(YUM_LIST), toml, *reads)
    return Probe(command, reads=words)


def dnf_versions(package: str) -> str:
    """The versions `dnf list --showduplicates --available` lists for `package` (any architecture).
    A row is `name.arch version repo`; where the name is too long for its column, dnf puts it on a
    line of its own and the version and repo on the next, so such a pair is joined first."""
    pkg = shlex.quote(package)
    return (f"dnf -q list --showduplicates --available {pkg} 2>/dev/null | awk -v p={pkg} '"
            "NF == 1 && index($1, p \".\") == 1 { held = $1; next } "
            "held != \"\" && NF == 2 { $0 = held \" \" $0 } "
            "{ held = \"\" } "
            "NF == 3 { n = $1; sub(/\\.[^.]*$/, \"\", n); if (n == p) print $2 }'")
