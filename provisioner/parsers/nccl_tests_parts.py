"""Where one nccl-tests run of a log ends and the next begins: the parts the log's lines are divided into.

A footer or a failure ends a run, and a preamble line unlike the one a part printed rows under starts another
(nccl_tests_verdict). The same preamble printed again after a part's rows, with no footer between, is either a
copy of the binary started late or a run started after one that was cut off; its `#  Rank` lines tell them apart
(RankLists): copies list their ranks before any row, a later run after the rows before it. So such a preamble
opens a part on probation, confirmed as a run of its own by a rank listing that follows rows, and given back to
the part before it by anything else it prints first (a row, a column header, a footer, a failure) or by the end
of the log.
"""

from __future__ import annotations

from provisioner.parsers.nccl_tests_table import NcclTestRow
from provisioner.parsers.nccl_tests_verdict import Lead, RunPart


class Parts:
    """The parts read so far, the lead lines not yet given to one, and whether the last part is on probation."""

    def __init__(self) -> None:
        self.rows: list[NcclTestRow] = []
        self.fields: dict[str, object] = {}  # what any run printed: versions, parameters, NCCL's last error
        self.parts: list[RunPart] = [RunPart()]
        self.number = 0  # the line being read
        self.lead: Lead | None = None
        self.leading = False  # the line being read is a lead line
        self.probation = False  # the last part repeats the preamble of the one before it, after that one's rows
        self.in_table = False  # a column header was printed and its footer was not yet

    @property
    def part(self) -> RunPart:
        return self.parts[-1]

    def start(self, kind: str = "", text: str = "") -> None:
        """A line that begins a run: after a footer, or after failures (nccl-tests stops at its first), it
        is the next run's; rows alone may be another copy's, interleaved with this one. A preamble line that
        differs from the one this run printed rows under is another run's, footer or not; the same one printed
        after rows begins a part on probation."""
        base = self.parts[-2] if self.probation else self.part
        if base.footer or base.failures or (kind and base.another(kind, text)):
            if self.probation:
                self.probation = False
            else:
                self.begin()
        elif kind != "columns" and self.part.rows:
            self.begin()
            self.probation = True
        if kind:
            self.part.preamble.setdefault(kind, text)

    def begin(self) -> None:
        """A new part from this line, or from the first of the lead lines it follows."""
        first, lead = self.number, self.lead
        if lead and lead.first < self.number and lead.first != self.part.first_line:
            first, self.part.last_line = lead.first, lead.before  # the lines it led with are its own
        self.parts.append(RunPart(first_row=len(self.rows), first_line=first))

    def listed(self, new_listing: bool) -> None:
        """A `#  Rank` line was read; `new_listing` when it began a listing after rows or a footer."""
        if not new_listing:
            return
        if self.probation:
            self.probation = False
        elif self.part.rows:
            self.begin()
        else:
            return
        self.in_table = False  # the run cut off left its table unfinished: the next header is another run's

    def settle_probation(self) -> None:
        """The part on probation printed something other than a run's preamble first: it was the part before."""
        if self.probation:
            self.probation = False
            self.parts[-2].absorb(self.parts.pop())

    def leads(self, kind: str = "", text: str = "", **fields: str) -> Lead:
        """A lead line: it may start a run, and what it says is the run's that it turns out to lead."""
        if self.lead is None:
            self.lead = Lead(first=self.number, before=self.part.last_line)
        self.leading = True
        self.start(kind, text)
        self.lead.fields.update(fields)
        self.fields.update(fields)
        return self.lead

    def settle(self) -> None:
        """The lead (if any) ended: what it said is the current part's."""
        if self.lead and not self.leading:
            self.part.fields.update(self.lead.fields)
            self.part.collective = self.lead.collective or self.part.collective
            self.lead = None
        self.leading = False

    def said(self, **fields: str) -> None:
        """What the current run printed outside its lead (NCCL's version, its last error)."""
        self.fields.update(fields)
        self.part.fields.update(fields)
