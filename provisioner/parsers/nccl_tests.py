"""Parse nccl-tests output (`all_reduce_perf`, `all_gather_perf`, ...): the result table, its summary, versions.

Columns come from the header line (`#  size  count  type  redop  [root]  time  algbw  busbw  error|#wrong
time ...`), first the out-of-place group then the in-place one. Older nccl-tests print an `error`
column (max relative error, a float), newer ones `#wrong` (count of wrong elements, an int); both land
in `oop_wrong`/`ip_wrong`, and `wrong_column` says which it was. `N/A` cells become None; integral cells
printed in exponent notation (`4e+06`, nccl-tests 2.19) are ints.

Since 2.17 the header carries versions as codes (`# nccl-tests version 2.19.6 nccl-headers=22809
nccl-library=22809`, i.e. NCCL 2.28.9) and the run is framed by `# Collective test starting/concluded`.
A run ends with `# Out of bounds values` and `# Avg bus bandwidth`: without them the output was cut
(`complete` False, `verdict` `truncated: no footer`). Several runs in one log are all read (`runs`) and
judged each on its own (nccl_tests_verdict, `run_results`; where one ends, nccl_tests_parts): `verdict` is the
worst run's.

Release shapes (nccl-tests' own print code): 2017-2018 builds print `nThread ...` and the footer without `#`,
`#   Rank N on HOST` without a pid, a `bytes N` header and times in ms (see nccl_tests_table); 2019-2022
`#   Rank N Pid P`, an `error` column and, for broadcast/gather/scatter, `root` without `redop`; 2.13
`#wrong`, 2.13.4 `Group`, 2.14.1 `[dddd:bb:dd]` bus ids, 2.16.7 the starting/concluded frame, 2.17.3 `# error:`
(NCCL's last error, kept in `nccl_last_error`), 2.17.4 the version line. rccl-tests adds `rccl-tests: Version
X` (no `#`), an in-place-only table (`-O 0`) and `# Errors with asterisks ...`. `# Avg bus bandwidth : X
FAILED` (under NCCL_TESTS_MIN_BW) and a table line with a size and a count that does not fit the header fail
the run, as do the launch errors printed before any table.

Comment lines (`# ...`) that are not recognised are skipped, as are NCCL log lines interleaved by
NCCL_DEBUG; `Test NCCL failure` style lines, and a rank killed by a signal (`Bus error`,
`Segmentation fault (core dumped)`, mpirun's `exited on signal 11`), are collected in `failures`.
Lines that fit nowhere (a data
row with the wrong number of cells, a tuning table NCCL printed between rows) are listed in `unplaced`;
only output with no header, row or summary at all raises ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field, ValidationError

from provisioner.errors import ParseError
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import (
    Collector,
    Fact,
    Line,
    Parsed,
    content_lines,
    fail,
    number,
    to_float,
)
from provisioner.parsers.nccl_line import is_log_line
from provisioner.parsers.nccl_tests_copies import RankLists
from provisioner.parsers.nccl_tests_failures import is_failure
from provisioner.parsers.nccl_tests_json import fields_from_json, invalid, looks_like_json
from provisioner.parsers.nccl_tests_parts import Parts
from provisioner.parsers.nccl_tests_table import (
    NcclTestRow,
    columns_of,
    infer_columns,
    parse_row,
    version_from_code,
)
from provisioner.parsers.nccl_tests_verdict import NcclTestsRun, Verdict, deciding, own_fields, worst

KIND = "nccl_tests"

RANK = re.compile(
    r"^#\s*Rank\s+(?P<rank>[0-9]+)(?:\s+Group\s+(?P<group>[0-9]+))?\s+Pid\s+(?P<pid>[0-9]+)\s+on\s+"
    r"(?P<host>\S+)\s+device\s+(?P<device>[0-9]+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$",
    re.ASCII,
)
NCCL_VERSION = re.compile(r"NCCL version (?P<version>[0-9]+(?:\.[0-9]+)+)(?:[-+](?P<suffix>\S+))?", re.ASCII)
CUDA_SUFFIX = re.compile(r"cuda(?P<cuda>[0-9]+(?:\.[0-9]+)*)", re.ASCII)

# The footer and the parameter line carry no `#` in the 2017-2018 builds (` Out of bounds values : 0 OK`).
_OUT_OF_BOUNDS = re.compile(
    r"^#?\s*Out of bounds values\s*:\s*(?P<count>[0-9]+)\s*(?P<verdict>\S+)?$", re.ASCII
)
_AVG_BUSBW = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<value>\S+)(?:\s+(?P<verdict>OK|FAILED))?$")
_BITWISE = re.compile(r"^#\s*Bitwise mismatches\s*:\s*(?P<count>[0-9]+)", re.ASCII)
_TESTS_VERSION = re.compile(
    r"^#\s*nccl-tests version\s+(?P<version>[0-9][\w.]*)(?:\s+\((?P<commit>[0-9a-f]+)\))?(?P<rest>.*)$"
)
_CODE = re.compile(r"\bnccl-(?P<what>headers|library)=(?P<code>[0-9]+)\b", re.ASCII)
_COLLECTIVE = re.compile(r"^#\s*Collective test (?P<event>starting|concluded)\s*:\s*(?P<name>\S+)")
_PARAMS = re.compile(r"^#?\s*nThread\s")
_BARE = re.compile(r"^(?:nThread\s|Out of bounds values\s*:|Avg bus bandwidth\s*:)")
# rccl-tests prints its own build without `#` (`rccl-tests: Version develop:33cc4df`); 2017-2018 nccl-tests
# the NCCL it was compiled with (`# NCCL Tests compiled with NCCL 2.2`).
_RCCL_TESTS = re.compile(r"^rccl-tests: Version (?P<version>\S+)")
_COMPILED_WITH = re.compile(r"^#\s*NCCL Tests compiled with NCCL (?P<version>[0-9]+\.[0-9]+)", re.ASCII)
# nccl-tests 2.17.3+ ends with NCCL's last error message (ncclGetLastError), when it has one.
_LAST_ERROR = re.compile(r"^#\s*error:\s*(?P<text>.*)$")
# 2.17.3 on, with -J FILE.json: printed by main before run() prints the version line (or, when it cannot
# write the file, `# skipping json output; ...`).
_JSON_OUTPUT = re.compile(r"^#\s*(?:Writing JSON output to\s|skipping json output;)")

__all__ = ["NcclTestRow", "NcclTestsRun", "version_from_code"]


class NcclTestRank(Fact):
    """One `#  Rank` line: which process drove which GPU on which host."""

    rank: int
    group: int | None = None
    pid: int
    host: str
    device: int
    bus_id: str
    name: str


class NcclTests(Parsed):
    """`verdict` sums the run up: `ok`, `wrong results` (a #wrong cell above 0), `out of bounds`,
    `failed` (a `Test ... failure` line), `truncated: no footer`, `unreadable row` (a line of the table with
    a size and a count that does not fit its header: a size whose figures cannot be judged) or `below minimum
    bandwidth` (the average under NCCL_TESTS_MIN_BW: `# Avg bus bandwidth : X FAILED`). A log of several
    runs is judged run by run (`run_results`, in order, each with its own footer; `run_verdicts` their verdicts),
    and `verdict` is the worst of them. The footer fields here (`avg_busbw`, `out_of_bounds`, ... and
    `collective`, `nccl_last_error`) are those of the run `verdict` comes from, so that they agree with it: the worst
    run, the last of equally bad ones (a log of passing runs gives its last run's); so are `parameters` and the
    versions, where that run printed them. `rows` holds every run's rows."""

    verdict: Verdict = "ok"
    run_verdicts: list[Verdict] = Field(default_factory=list)
    run_results: list[NcclTestsRun] = Field(default_factory=list)
    rows: list[NcclTestRow] = Field(default_factory=list)
    avg_busbw: float | None = None
    avg_busbw_ok: bool | None = None  # None: no NCCL_TESTS_MIN_BW to judge it against
    unreadable_rows: list[int] = Field(default_factory=list)  # line numbers
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    wrong_column: str | None = None
    columns: list[str] = Field(default_factory=list)
    nccl_version: str | None = None
    cuda_version: str | None = None
    devices: list[NcclTestRank] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)
    failures: list[str] = Field(default_factory=list)
    nccl_tests_version: str | None = None
    nccl_headers_version: str | None = None
    nccl_library_version: str | None = None
    rccl_tests_version: str | None = None
    nccl_last_error: str | None = None  # `# error: ...`: informative, a run can pass with it
    collective: str | None = None
    bitwise_mismatches: int | None = None
    runs: int = 0
    single_rank_runs: int = 0  # >1: N copies each ran alone (a build without MPI started by mpirun/srun)
    # >1: N processes each ran a job of their own (`separate_ranks` ranks each, all local to it): the rank
    # lists restart at rank 0 for every process, as in single_rank_runs but also with `-g`/`-t` above 1. Both
    # read one listing of ranks at a time: a run listed after another's rows is not a copy of it (RankLists).
    separate_runs: int = 0
    separate_ranks: list[int] = Field(default_factory=list)


def parse_rank(line: Line) -> NcclTestRank | None:
    """The rank described by a `#  Rank N Group G Pid P on HOST device D [BUS] NAME` line, else None."""
    m = RANK.match(line.stripped)
    if not m:
        return None
    return NcclTestRank(
        rank=int(m.group("rank")),
        group=int(m.group("group")) if m.group("group") else None,
        pid=int(m.group("pid")),
        host=m.group("host"),
        device=int(m.group("device")),
        bus_id=m.group("bus").strip(),
        name=m.group("name").strip(),
    )


def split_nccl_version(text: str) -> tuple[str, str | None] | None:
    """("2.19.3", "12.3") from text containing `NCCL version 2.19.3+cuda12.3`; None if it has none."""
    m = NCCL_VERSION.search(text)
    if not m:
        return None
    cuda = CUDA_SUFFIX.search(m.group("suffix") or "")
    return m.group("version"), cuda.group("cuda") if cuda else None


class _Run(Parts):
    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] | None = None
        self.ranks = RankLists()
        self.failures: list[str] = []
        self.runs = 0
        self.open = False  # a run has started (header, rows) and its footer is not printed yet
        self.headerless = False  # rows came before any column header (a fragment of the output)
        self.alone = "oop"  # the group a one-group header names, from the label line above it
        self.unreadable: list[int] = []

    def comment(self, line: Line, body: str) -> bool:
        """Read a `#` line; False when it is an unrecognised comment (skipped, not an error)."""
        if "in-place" in body or "out-of-place" in body:
            self.alone = "oop" if "out-of-place" in body else "ip"
        if (header := columns_of(line, self.alone)) is not None:
            if self.columns != header or not self.in_table:
                self.runs += 1
                self.start("columns", " ".join(header))
            self.settle_probation()
            self.columns, self.open, self.in_table = header, True, True
            self.part.open = True
        elif rank := parse_rank(line):
            self.listed(self.ranks.add(rank, len(self.rows), sum(len(part.footer_lines) for part in self.parts)))
        elif m := _OUT_OF_BOUNDS.match(body):
            self.settle_probation()
            verdict = (m.group("verdict") or "").upper()
            self.part.out_of_bounds.append((int(m.group("count")), verdict == "OK" if verdict else None))
            self.part.footer_lines.append(line.number)
        elif m := _AVG_BUSBW.match(body):
            self.settle_probation()
            self.part.avg_busbw.append(to_float(KIND, m.group("value"), line, "average bus bandwidth"))
            self.part.avg_busbw_ok.append(m.group("verdict") == "OK" if m.group("verdict") else None)
            self.part.footer_lines.append(line.number)
            self.open = self.in_table = self.part.open = False
        elif m := _BITWISE.match(body):
            self.settle_probation()
            self.part.bitwise_mismatches += int(m.group("count"))
            self.part.bitwise = True
        elif _PARAMS.match(body):
            self.start("parameters", " ".join(body.lstrip("#").split()))
            self.fields["parameters"] = self.part.parameters = _parameters(body)
            self.part.starts += 1
        elif m := _TESTS_VERSION.match(body):
            codes = {f"nccl_{c.group('what')}_version": version_from_code(int(c.group("code")))
                     for c in _CODE.finditer(m.group("rest"))}
            self.leads("version", body, nccl_tests_version=m.group("version"), **codes)
        elif m := _COMPILED_WITH.match(body):
            self.leads(nccl_headers_version=m.group("version"))
        elif _JSON_OUTPUT.match(body):
            self.leads()
        elif m := _LAST_ERROR.match(body):
            self.said(nccl_last_error=m.group("text").strip())
        elif m := _COLLECTIVE.match(body):
            if m.group("event") == "starting":
                self.leads("collective", m.group("name")).collective = m.group("name")
                self.open = self.part.open = True
            else:
                self.part.collective = m.group("name")
        else:
            return False
        return True

    def line(self, line: Line) -> bool:
        body = line.stripped
        if body.startswith("#") or _BARE.match(body):
            return self.comment(line, body)
        if m := _RCCL_TESTS.match(body):
            self.leads(rccl_tests_version=m.group("version"))
            return True
        version = split_nccl_version(body)
        if version and (body.startswith("NCCL version") or is_log_line(body)):
            self.said(nccl_version=version[0], **({"cuda_version": version[1]} if version[1] else {}))
            return True
        if is_log_line(body):
            return False
        if is_failure(body):
            self.settle_probation()
            self.failures.append(body)
            self.part.failures.append(body)
            self.part.failure_lines.append(line.number)
            return True
        if self.columns is None:
            cells = line.stripped.split()
            if number(cells[0]) is None or (inferred := infer_columns(cells)) is None:
                fail(KIND, "line before the column header (expected '#  size  count  type ...')", line)
            # A fragment that starts inside the table: its rows are read by their shape, and the run is
            # marked incomplete for the header it lacks.
            self.columns, self.headerless, self.in_table = inferred, True, True
            self.runs += 1
        try:
            row = parse_row(self.columns, line)
        except ParseError:
            # A size and a count between the header and the footer: a result row gone wrong. Outside a table
            # nccl-tests prints no row, so such a line (a wrapper's `/usr/bin/time -f '%e %M'`) is someone else's.
            cells = body.split()
            if self.in_table and len(cells) >= 2 and number(cells[0]) is not None and number(cells[1]) is not None:
                self.settle_probation()
                self.unreadable.append(line.number)
                self.part.unreadable = True
            raise
        self.settle_probation()
        self.rows.append(row)
        self.part.rows += 1
        self.part.wrong |= any(isinstance(w, int) and w > 0 for w in (row.oop_wrong, row.ip_wrong))
        self.open = self.part.open = True
        return True

    def results(self) -> list[NcclTestsRun]:
        """Each run, in order (a run that printed nothing that bears on a verdict is left out)."""
        return [part.summary() for part in self.parts if not part.empty()]


def parse_nccl_tests(text: str) -> NcclTests:
    if looks_like_json(text):  # the report `-J FILE.json` writes
        try:
            return NcclTests.model_validate(fields_from_json(text))
        except ValidationError as exc:
            raise invalid(exc, "the report") from None
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    run = _Run()
    found = Collector(KIND)
    for line in lines:
        run.number = line.number
        found.attempt(line, run.line)
        run.settle()
        run.part.seen(line.number)
    run.settle_probation()
    # Skipped comments and NCCL log lines count as placed but not as recognised nccl-tests output.
    found.recognised = _recognised(run)
    results = run.results()
    run_verdicts = [result.verdict for result in results]
    verdict = worst(run_verdicts)
    # Output without its structural anchors is never complete: no header, no table, or no footer.
    if run.columns is None or run.headerless:
        found.lack("column header (#  size  count  type ...)")
    if not run.rows:
        found.lack("result table")
    if "truncated: no footer" in run_verdicts or run.open:
        found.lack("footer (# Out of bounds values, # Avg bus bandwidth)")
    if run.unreadable:
        found.lack(f"a readable result row at line {', '.join(str(n) for n in run.unreadable)}")
    if not run.rows and verdict == "ok":
        verdict = "truncated: no footer" if run.columns is not None else verdict
    completeness = found.result("no nccl-tests header, result table or summary found")
    columns = run.columns
    wrong = next((c.partition(":")[2] for c in columns or [] if ":" in c), None)
    fields = dict(run.fields)
    fields.pop("nccl_last_error", None)
    if decided := deciding(results):
        fields.update(own_fields(decided))
    if not fields.get("nccl_version") and fields.get("nccl_library_version"):
        fields["nccl_version"] = fields["nccl_library_version"]
    return NcclTests(
        verdict=verdict,
        run_verdicts=run_verdicts,
        run_results=results,
        rows=run.rows,
        wrong_column=wrong,
        columns=[c.partition(":")[0] for c in columns or []],
        devices=run.ranks.devices,
        failures=run.failures,
        runs=run.runs,
        unreadable_rows=run.unreadable,
        single_rank_runs=run.ranks.single_rank_runs(),
        separate_runs=len(copies := run.ranks.separate_copies()),
        separate_ranks=[len(copy) for copy in copies],
        **fields,
        **completeness,
    )


def _recognised(run: _Run) -> int:
    footers = sum(len(part.footer_lines) + part.bitwise for part in run.parts)
    return len(run.rows) + len(run.ranks) + len(run.failures) + len(run.fields) + footers + (run.columns is not None)


def _parameters(body: str) -> dict[str, str]:
    # `# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor) warmup iters: 5 iters: 20 ...`
    text = body.lstrip("#").strip()
    pairs = re.findall(r"([A-Za-z][A-Za-z ]*?):?\s+(\S+)(?=\s+[A-Za-z]|\s*$)", text)
    return {key.strip(): value for key, value in pairs}
