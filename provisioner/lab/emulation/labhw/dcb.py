"""`dcb` (iproute2): show a netdev's DCB app table, PFC and ETS, from the state `mlnx_qos` keeps per node.

Reading only: the app table, PFC and ETS that mlx5 reports for the node's `mlnx_qos` state. mlx5 ties the
trust mode to the DCB app table (the first DSCP entry switches the port to DSCP trust, removing the last
switches it back), so the table holds the 64 DSCP entries of the map exactly while trust is `dscp`. The
PFC delay mlx5 reports is the cable length. Setters and other objects are refused: set with `mlnx_qos`.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from .context import Ctx
from .core import ToolExit
from .kmod import rdma_present
from .links import netdev_exists
from .mlnx_qos import Qos, load_qos

VERSION = "dcb utility, iproute2-6.1.0"
USAGE = ("Usage: dcb [ OPTIONS ] OBJECT { COMMAND | help }\n"
         "       dcb [ -f | --force ] { -b | --batch } filename [ -n | --netns ] netnsname\n"
         "where  OBJECT := { app | apptrust | buffer | dcbx | ets | maxrate | pfc | rewr }\n"
         "       OPTIONS := [ -V | --Version | -i | --iec | -j | --json\n"
         "                  | -N | --Numeric | -p | --pretty\n"
         "                  | -s | --statistics | -v | --verbose]")
OBJECTS = ("app", "apptrust", "buffer", "dcbx", "ets", "maxrate", "pfc", "rewr")
# Where iproute2 looks for DSCP names, in order (the second only when the first does not exist).
DSFIELD_FILES = ("/etc/iproute2/rt_dsfield", "/usr/share/iproute2/rt_dsfield")
TSA_NUMBERS = {"strict": 0, "cbs": 1, "ets": 2, "vendor": 255}


def matches(word: str, keyword: str) -> bool:
    """iproute2's keyword test: `word` is a non-empty prefix of `keyword`."""
    return bool(word) and keyword.startswith(word)


# The commands of the last batch read from standard input (None: none was), for `cacheable`.
_stdin_batch: list[list[str]] | None = None
STDIN_KEYED_ENV = "FABNET_LAB_STDIN_KEYED"  # set by the fast path when its key holds standard input


def _show_kept(words: list[str], numeric: bool) -> bool:
    """A `show` whose answer depends only on the state the fast path's key covers: not DSCP names (they
    come from the node's rt_dsfield file)."""
    return len(words) >= 2 and matches(words[1], "show") and (numeric or not matches(words[0], "app"))


def cacheable(args: list[str]) -> bool:
    """Whether the fast path may keep this call's output: one such `show`, or a batch of them read from
    standard input, which the fast path then keys too (never a batch file: its text is not in the key)."""
    flags = [a for a in args if a.startswith("-") and a != "-"]
    numeric = any(a == "--Numeric" or (not a.startswith("--") and "N" in a) for a in flags)
    batch = any(a.startswith("--b") or (not a.startswith("--") and "b" in a) for a in flags)
    if batch:
        commands = _stdin_batch
        return (os.environ.get(STDIN_KEYED_ENV) == "1" and commands is not None and bool(commands)
                and all(_show_kept(words, numeric) for words in commands))
    return _show_kept([a for a in args if not a.startswith("-")], numeric)


class _Options:
    def __init__(self) -> None:
        self.numeric = False
        self.stats = False


def cmd_dcb(ctx: Ctx, args: list[str]) -> int:
    options, rest, batch = _options(ctx, args)
    if batch is not None:
        return _batch(ctx, options, batch)
    _command(ctx, options, rest)
    return 0


def _options(ctx: Ctx, args: list[str]) -> tuple[_Options, list[str], str | None]:
    options, batch = _Options(), None
    rest = list(args)
    while rest and rest[0].startswith("-") and rest[0] != "-":
        flag = rest.pop(0)
        if flag == "--":
            break
        long = {"--Numeric": "N", "--statistics": "s", "--pretty": "p", "--iec": "i", "--force": "f",
                "--json": "j", "--Version": "V", "--help": "h", "--batch": "b", "--netns": "n", "--verbose": "v"}
        letters = long[flag] if flag in long else flag[1:] if not flag.startswith("--") else "?"
        for number, letter in enumerate(letters):
            if letter == "N":
                options.numeric = True
            elif letter == "s":
                options.stats = True
            elif letter in "pifv":
                pass
            elif letter == "V":
                ctx.print(VERSION)
                raise ToolExit("", 0)
            elif letter == "h":
                raise ToolExit(USAGE, 0)
            elif letter == "b":
                value = letters[number + 1:] or (rest.pop(0) if rest else "")
                if not value:
                    raise ToolExit("dcb: option requires an argument -- 'b'\n" + USAGE, 1)
                batch = value
                break
            elif letter == "j":
                raise ToolExit("dcb: fabnet lab emulation: JSON output (-j) is not emulated; "
                               "use the plain output", 1)
            elif letter == "n":
                raise ToolExit("dcb: fabnet lab emulation: -n/--netns is not emulated", 1)
            else:
                raise ToolExit("Unknown option.\n" + USAGE, 1)
    return options, rest, batch


def _batch(ctx: Ctx, options: _Options, name: str) -> int:
    """Commands one per line (`-` is standard input); the first failing line ends the batch, as without -f."""
    global _stdin_batch
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text()
    except OSError as exc:
        raise ToolExit(f"Cannot open file \"{name}\" for reading: {exc.strerror}", 1) from None
    commands: list[list[str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            raise ToolExit(f"Command failed {name}:{number}", 1) from None
        if not words:
            continue
        commands.append(words)
        if name == "-":
            _stdin_batch = commands
        try:
            _command(ctx, options, words)
        except ToolExit as exc:
            raise ToolExit("\n".join(filter(None, (exc.message, f"Command failed {name}:{number}"))), 1) from None
    return 0


def _command(ctx: Ctx, options: _Options, words: list[str]) -> None:
    if not words or matches(words[0], "help"):
        raise ToolExit(USAGE, 0)  # the real tool prints its usage on stderr and succeeds
    obj = next((o for o in OBJECTS if (matches(words[0], o) if o not in ("apptrust", "rewr") else words[0] == o)),
               None)
    if obj is None:
        raise ToolExit(f'Object "{words[0]}" is unknown', 1)
    rest = words[1:]
    if not rest or matches(rest[0], "help"):
        raise ToolExit(f"Usage: dcb {obj} show dev STRING (fabnet lab emulation: show only)", 0)
    if not matches(rest[0], "show"):
        raise ToolExit(f"dcb: fabnet lab emulation: only `dcb {obj} show` is emulated; set the port's QoS "
                       "with mlnx_qos", 1)
    shows: dict[str, Callable[[Ctx, _Options, Qos, list[str]], None]] = {
        "app": _show_app, "pfc": _show_pfc, "ets": _show_ets, "dcbx": _show_dcbx}
    if obj not in shows:
        raise ToolExit(f"dcb: fabnet lab emulation: `dcb {obj}` is not emulated", 1)
    rest = rest[1:]
    if not rest:
        raise ToolExit(f"Usage: dcb {obj} show dev STRING", 0)
    if not matches(rest[0], "dev"):
        raise ToolExit(f"Expected `dev DEV', not `{rest[0]}'", 1)
    if len(rest) < 2:
        raise ToolExit('Command line is not complete. Try option "help"', 255)
    netdev = rest[1]
    if not netdev_exists(ctx.env, netdev):
        raise ToolExit("Attribute read: No such device", 1)
    if ctx.hw.hca_for_netdev(netdev) is None or not rdma_present(ctx.env, ctx.hw):
        # A netdev without a ConnectX behind it has no DCB operations in its driver.
        raise ToolExit("Attribute read: Operation not supported", 1)
    shows[obj](ctx, options, load_qos(ctx.env, ctx.hw, netdev), rest[2:])


def _pick(obj: str, keywords: list[str], asked: list[str]) -> list[str]:
    """The rows asked for, in the order asked (each keyword by iproute2's prefix test); all when none."""
    if not asked:
        return keywords
    chosen = []
    for word in asked:
        keyword = next((k for k in keywords if matches(word, k)), None)
        if keyword is None:
            raise ToolExit(f'What is "{word}"?\nUsage: dcb {obj} show dev STRING', 1)
        chosen.append(keyword)
    return chosen


def _row(name: str, values: list[object]) -> str:
    return f"{name} " + "".join(f"{index}:{value} " for index, value in enumerate(values))


def _dscp_names() -> dict[int, str]:
    """DSCP -> name from the node's rt_dsfield file (DS field values, the DSCP shifted left by two)."""
    for path in DSFIELD_FILES:
        try:
            lines = Path(path).read_text().splitlines()
        except FileNotFoundError:
            continue
        except OSError:
            return {}
        names: dict[int, str] = {}
        for line in lines:
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2:
                try:
                    value = int(fields[0], 0)
                except ValueError:
                    continue
                if value % 4 == 0 and 0 < value < 256:  # iproute2 prints DS field 0 as "0" whatever its name
                    names[value >> 2] = fields[1]
        return names
    return {}


def _show_app(ctx: Ctx, options: _Options, qos: Qos, asked: list[str]) -> None:
    # The order the real tool tests keywords in; `pcp-prio` is matched whole, not by prefix.
    keywords = ["ethtype-prio", "dscp-prio", "stream-port-prio", "dgram-port-prio", "port-prio", "default-prio"]
    entries = [(dscp, qos.dscp2prio[dscp]) for dscp in range(64)] if qos.trust == "dscp" else []
    chosen = [w if w == "pcp-prio" else "" for w in asked]
    picked = _pick("app", keywords, [w for w in asked if w != "pcp-prio"])
    for keyword in [c or picked.pop(0) for c in chosen] if asked else keywords:
        if keyword == "dscp-prio" and entries:  # every other table is empty on these ports
            names = {} if options.numeric else _dscp_names()
            ctx.print(_row("dscp-prio", []) + "".join(f"{names.get(d, d)}:{p} " for d, p in entries))


def _show_pfc(ctx: Ctx, options: _Options, qos: Qos, asked: list[str]) -> None:
    rows = {
        "pfc-cap": "pfc-cap 8 ", "macsec-bypass": "macsec-bypass off ", "delay": f"delay {qos.cable_len} ",
        "prio-pfc": _row("prio-pfc", ["on" if flag else "off" for flag in qos.pfc]),
        "requests": _row("requests", [0] * 8), "indications": _row("indications", [0] * 8),
    }
    if not asked:
        ctx.print(rows["pfc-cap"] + rows["macsec-bypass"] + rows["delay"])
        ctx.print(rows["prio-pfc"])
        if options.stats:
            ctx.print(rows["requests"])
            ctx.print(rows["indications"])
        return
    order = ["prio-pfc", "pfc-cap", "macsec-bypass", "delay", "requests", "indications"]
    for keyword in _pick("pfc", order, asked):
        ctx.print(rows[keyword])


def _show_ets(ctx: Ctx, options: _Options, qos: Qos, asked: list[str]) -> None:
    # mlx5 reports no recommendation TLV and no priority groups: those rows read as zeros and `strict`
    # (TSA 0), which is what an all-zero kernel structure prints.
    rows = {
        "willing": "willing off ", "ets-cap": "ets-cap 8 ", "cbs": "cbs off ",
        "tc-bw": _row("tc-bw", list(qos.tcbw)), "pg-bw": _row("pg-bw", [0] * 8),
        "tc-tsa": _row("tc-tsa", list(qos.tsa)), "prio-tc": _row("prio-tc", list(qos.prio_tc)),
        "reco-tc-bw": _row("reco-tc-bw", [0] * 8), "reco-tc-tsa": _row("reco-tc-tsa", ["strict"] * 8),
        "reco-prio-tc": _row("reco-prio-tc", [0] * 8),
    }
    if not asked:
        ctx.print(rows["willing"] + rows["ets-cap"] + rows["cbs"])
        for keyword in ("tc-bw", "pg-bw", "tc-tsa", "prio-tc", "reco-tc-bw", "reco-tc-tsa", "reco-prio-tc"):
            ctx.print(rows[keyword])
        return
    order = ["willing", "ets-cap", "cbs", "tc-tsa", "reco-tc-tsa", "tc-bw", "pg-bw", "reco-tc-bw", "prio-tc",
             "reco-prio-tc"]
    for keyword in _pick("ets", order, asked):
        ctx.print(rows[keyword])


def _show_dcbx(ctx: Ctx, options: _Options, qos: Qos, asked: list[str]) -> None:
    if asked:
        raise ToolExit(f'What is "{asked[0]}"?', 1)
    # mlx5 in OS mode: the host runs DCBX (IEEE); in firmware mode the NIC's own agent does.
    ctx.print("host ieee " if qos.dcbx == "os" else "lld-managed ieee ")
