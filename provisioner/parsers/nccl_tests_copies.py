"""Tell one nccl-tests job from copies of the binary that each ran alone, by the `#  Rank` lines they list."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.parsers.nccl_tests import NcclTestRank


def single_rank_runs(devices: list[NcclTestRank]) -> int:
    """How many one-rank runs the rank lists show when every listed rank is rank 0 of its own run (the
    same binary started N times, each initialising a communicator of one rank), else 0."""
    ranks = [d.rank for d in devices]
    if len(ranks) >= 2 and set(ranks) == {0} and len({(d.host, d.pid) for d in devices}) == len(ranks):
        return len(ranks)
    return 0


def separate_copies(devices: list[NcclTestRank]) -> list[list[NcclTestRank]]:
    """The rank lists of processes that each ran alone, when there are two or more of them, else [].

    nccl-tests prints one `#  Rank` line per GPU a process drives (nThreads * nGpus of them, all with that
    process's pid), numbered from proc * nThreads * nGpus; under MPI only the first process prints, the
    others' lines gathered to it (src/common.cu, e.g. commit af6df96, and src/util.cu since ad956f1). A
    build without MPI started N times has proc 0 in every copy, so each copy lists ranks 0..k-1 under its
    own pid, and copies' lines may interleave. A process is (host, pid); a rank it lists twice starts
    another copy (two containers may share both)."""
    copies: list[list[NcclTestRank]] = []
    current: dict[tuple[str, int], list[NcclTestRank]] = {}
    for device in devices:
        key = (device.host, device.pid)
        copy = current.get(key)
        if copy is None or any(d.rank == device.rank for d in copy):
            copy = current[key] = []
            copies.append(copy)
        copy.append(device)
    if len(copies) < 2 or any(sorted(d.rank for d in c) != list(range(len(c))) for c in copies):
        return []  # one job: its processes hold disjoint ranks (or the list is not one we can read)
    return copies


class RankLists:
    """A log's `#  Rank` lines, in the listings that printed them. Copies started together each list their ranks
    before any of them prints a row (their rows and footers interleave later), and one job lists all its ranks
    before its table; a run started after another lists its own after that run's rows or footer. So a rank line
    that follows rows or a footer printed since the last rank line begins another listing, and each listing is
    judged on its own: two runs one after the other, both rank 0 of one process, are not two copies."""

    def __init__(self) -> None:
        self.lists: list[list[NcclTestRank]] = []
        self.mark: tuple[int, int] | None = None

    def add(self, rank: NcclTestRank, rows: int, footers: int) -> bool:
        """A rank line, read after `rows` result rows and `footers` footer lines of the whole log; True when it
        begins a listing after rows or a footer (a run started after the one before it)."""
        began = self.mark != (rows, footers)
        if began:
            self.lists.append([])
            self.mark = (rows, footers)
        self.lists[-1].append(rank)
        return began and (rows, footers) != (0, 0)

    @property
    def devices(self) -> list[NcclTestRank]:
        return [rank for listing in self.lists for rank in listing]

    def __len__(self) -> int:
        return sum(len(listing) for listing in self.lists)

    def single_rank_runs(self) -> int:
        """The most one-rank copies any one listing shows (`single_rank_runs`), else 0."""
        return max((single_rank_runs(listing) for listing in self.lists), default=0)

    def separate_copies(self) -> list[list[NcclTestRank]]:
        """The copies of the listing that shows the most (`separate_copies`), else []."""
        return max((separate_copies(listing) for listing in self.lists), key=len, default=[])
