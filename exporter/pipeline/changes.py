"""What changed since an earlier sweep: each citation's status then against its status now.

A citation fails in one of four ways, kept apart as the rest of the report keeps them:
unrepaired drift and missing documents (readers see them broken), repaired drift (applying the
repairs fixes it) and superseded documents (routine after a refresh). ``ok`` is not failing, nor
is ``invalid`` (the record could not be checked at all). Per failing status a citation is *new*
(failing so now, not failing or absent before), *still failing* (so before and now), *fixed*
(failing so before, ok now), *moved* (from or to another status) or *gone* (failing so before,
absent from this run: not fixed, it was not checked).

The earlier sweep's verdicts are held as one entry per citation id (id -> a small status code,
marked once this run meets the id): about 90 bytes a citation with ids of 11 characters, one
more per longer character, so a million citations take about 90 MB (and reading their verdict
file about 11 s, the JSON parse of each line most of it). This run's verdicts are compared as
they come and never kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from exporter.checks.verdict import Status
from exporter.pipeline.details import MAX_SOURCES, NO_SOURCE, OTHER_SOURCE

__all__ = ["FAILING", "Changes", "PreviousSummary", "PreviousVerdicts"]

# the failing statuses, what readers see broken first
FAILING = (
    Status.DRIFT_UNREPAIRED,
    Status.DOCUMENT_MISSING,
    Status.DRIFT_REPAIRED,
    Status.SUPERSEDED,
)
_STATUSES = tuple(Status)
_CODES = {status: code for code, status in enumerate(_STATUSES)}
_FAILING_CODES = frozenset(_CODES[status] for status in FAILING)
_OK = _CODES[Status.OK]
# added to an id's code once this run met it (codes stay small ints: no object per citation)
_SEEN = len(_STATUSES)
ABSENT = -1  # "before" of a citation the earlier sweep did not have


@dataclass
class PreviousVerdicts:
    """An earlier sweep's verdicts: the status of each citation id (the last, for an id met
    twice), and how many verdicts had no id to compare by."""

    ids: dict[str, int] = field(default_factory=dict)
    without_id: int = 0
    repeated: int = 0

    def add(self, citation_id: str | None, status: Status) -> None:
        if citation_id is None:
            self.without_id += 1
            return
        if citation_id in self.ids:
            self.repeated += 1
        self.ids[citation_id] = _CODES[status]


@dataclass(frozen=True)
class PreviousSummary:
    """An earlier sweep's summary: its counts per status, and no citation ids."""

    statuses: Counter[str]

    def rows(self, now: Counter[str]) -> list[dict[str, Any]]:
        """Per status, the count then, now, and the difference."""
        return [
            {
                "status": status.value,
                "previous": self.statuses[status.value],
                "now": now[status.value],
                "change": now[status.value] - self.statuses[status.value],
            }
            for status in (*FAILING, Status.INVALID, Status.OK)
        ]


def _kind(before: int, now: int) -> str | None:
    """What a citation's move is, as the table by source counts it."""
    failing_before, failing_now = before in _FAILING_CODES, now in _FAILING_CODES
    if failing_now:
        return "still" if failing_before else "new"
    return "fixed" if failing_before and now == _OK else None


class Changes:
    """This run's verdicts against an earlier sweep's, counted as they come: moves between
    statuses (at most 7 x 6 of them) and per source; the earlier ids are marked, not copied."""

    def __init__(self, previous: PreviousVerdicts) -> None:
        self.previous = previous
        self.before: Counter[int] = Counter(previous.ids.values())
        self.moves: Counter[tuple[int, int]] = Counter()
        self.by_source: dict[str | None, Counter[str]] = {}
        self.without_id = 0  # this run's verdicts with no id to compare by
        self.repeated = 0  # this run's verdicts of an id met already in this run
        self._gone: Counter[int] | None = None

    def add(self, citation_id: str | None, status: Status, source: str | None) -> None:
        if citation_id is None:
            self.without_id += 1
            return
        ids, now = self.previous.ids, _CODES[status]
        code = ids.get(citation_id)
        if code is None:
            before = ABSENT
        elif code >= _SEEN:
            before = code - _SEEN
            self.repeated += 1
        else:
            before = code
            ids[citation_id] = code + _SEEN
        self.moves[before, now] += 1
        kind = _kind(before, now)
        if kind is not None:
            self._source(source)[kind] += 1

    def _source(self, source: str | None) -> Counter[str]:
        counts = self.by_source.get(source)
        if counts is None and len(self.by_source) >= MAX_SOURCES:
            source = OTHER_SOURCE  # the further sources, counted together
            counts = self.by_source.get(source)
        if counts is None:
            counts = self.by_source[source] = Counter()
        return counts

    def gone(self) -> Counter[int]:
        """Per status then, the earlier citations this run did not have (one pass, once)."""
        if self._gone is None:
            self._gone = Counter(code for code in self.previous.ids.values() if code < _SEEN)
        return self._gone

    def rows(self) -> list[dict[str, Any]]:
        """Per failing status: then, now, and how each citation got there or left."""
        gone, moves = self.gone(), self.moves
        rows = []
        for status in FAILING:
            code = _CODES[status]
            into = [moves[b, code] for b in range(ABSENT, _SEEN)]
            out_of = [moves[code, n] for n in range(_SEEN)]
            rows.append(
                {
                    "status": status.value,
                    "previous": self.before[code],
                    "now": sum(into),
                    "new": sum(moves[b, code] for b in range(ABSENT, _SEEN) if _new(b)),
                    "still": moves[code, code],
                    "fixed": moves[code, _OK],
                    "moved_in": sum(moves[b, code] for b in _FAILING_CODES if b != code),
                    "moved_out": sum(out_of) - moves[code, code] - moves[code, _OK],
                    "gone": gone[code],
                }
            )
        return rows

    def moved(self) -> list[dict[str, Any]]:
        """The moves between statuses of a failing citation (to ok is fixed, counted apart)."""
        return [
            {"from": _STATUSES[before].value, "to": _STATUSES[now].value, "count": count}
            for (before, now), count in sorted(self.moves.items(), key=lambda m: -m[1])
            if before != now and before in _FAILING_CODES and now != _OK
        ]

    def sources(self) -> list[dict[str, Any]]:
        """Per source (this run's), new, fixed and still failing: the most new first."""
        rows = [
            {
                "source": NO_SOURCE if source is None else source,
                "unnamed": source is None,
                "new": counts["new"],
                "fixed": counts["fixed"],
                "still": counts["still"],
            }
            for source, counts in self.by_source.items()
        ]
        return sorted(rows, key=lambda r: (-r["new"], -r["still"], -r["fixed"], r["source"]))

    def totals(self) -> dict[str, int]:
        """How many citations were compared, are new to this run, or gone from it."""
        moves = self.moves
        return {
            "matched": sum(c for (before, _), c in moves.items() if before != ABSENT),
            "added": sum(c for (before, _), c in moves.items() if before == ABSENT),
            "gone": sum(self.gone().values()),
            "without_id": self.without_id + self.previous.without_id,
            "repeated": self.repeated + self.previous.repeated,
        }


def _new(before: int) -> bool:
    """A citation failing now is new when it was not failing before (ok, invalid, absent)."""
    return before not in _FAILING_CODES
