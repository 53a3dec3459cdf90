"""What applying a sweep's verdicts changes in a stored citation, decided without I/O.

A verdict's action becomes a :class:`Change`: the fields to write and what the citation must
still hold for the change to be made (``cited``: its chunk id, span and quote as the sweep read
them, and its version). Against the citation as it is now, :func:`decide` says whether to
apply it, whether it is already applied (running the same verdicts again changes nothing), or
whether the citation changed since the sweep (a conflict, left alone). The targets (a Postgres
table, a JSON Lines archive) read and write; this decides, the same way for both.

What each action writes, as fields of the citation record (a table maps them to columns):

=======================  =====================================================
``rewrite_offsets``      ``chunk_id`` and ``chunk_span``: where the quote is now
``pin_archived_version`` ``pinned_version``: the version the answer was written against
``degrade_to_document``  ``degraded``: true (cite the document, not the span)
``drop_citation``        ``dropped``: true (the document is gone)
``suppress_claim``       ``suppressed``: true (a high-severity claim without a source)
=======================  =====================================================

and every change writes ``repair_sweep`` (which sweep) and ``repaired_at`` (when). Nothing is
ever deleted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ACTION_FIELDS",
    "MARK_FIELDS",
    "ApplyPolicy",
    "Change",
    "Decision",
    "Expected",
    "Held",
    "Skip",
    "Tally",
    "decide",
    "plan",
    "quote_sha256",
    "written",
]

ACTION_FIELDS: dict[str, tuple[str, ...]] = {
    "rewrite_offsets": ("chunk_id", "chunk_span"),
    "pin_archived_version": ("pinned_version",),
    "degrade_to_document": ("degraded",),
    "drop_citation": ("dropped",),
    "suppress_claim": ("suppressed",),
}
# the fields apply writes beyond the record's own: a table needs a column for each it uses
MARK_FIELDS = ("pinned_version", "degraded", "dropped", "suppressed", "repair_sweep", "repaired_at")
# what a change compares: the fields the sweep saw
EXPECTED_FIELDS = ("chunk_id", "chunk_span", "doc_version", "quote")

Decision = Literal["apply", "already", "conflict"]


@dataclass(frozen=True, slots=True)
class ApplyPolicy:
    """Which verdicts a team lets apply act on (the rest are skipped, by reason)."""

    # rewrite only repairs found this way (unique, context, position_hint); empty: any
    repairs_how: frozenset[str] = frozenset()
    # rewrite only repairs whose quote matched at least this similarity (0-100)
    min_similarity: float = 0.0
    never_suppress: bool = False


@dataclass(frozen=True, slots=True)
class Expected:
    """What the citation held when the sweep checked it."""

    chunk_id: str
    chunk_span: tuple[int, int]
    doc_version: str | None
    quote_sha256: str


@dataclass(frozen=True, slots=True)
class Change:
    """One citation's change: its action, what it must hold, what to write."""

    citation_id: str
    action: str
    expected: Expected
    after: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Skip:
    """A verdict apply does not act on, and why (a bounded label)."""

    reason: str
    citation_id: str | None = None


def quote_sha256(quote: str) -> str:
    """The quote's digest as verdicts carry it in ``cited``."""
    return hashlib.sha256(quote.encode("utf-8", "surrogatepass")).hexdigest()


def plan(verdict: Any, policy: ApplyPolicy = ApplyPolicy()) -> Change | Skip:
    """The change a verdict record asks for, or why there is none."""
    if not isinstance(verdict, dict):
        return Skip("not_a_verdict")
    if "check" in verdict:
        return Skip("coverage_result")  # an answer's coverage: no citation row to change
    citation_id, action = verdict.get("citation_id"), verdict.get("action")
    if not _is_id(citation_id) or not isinstance(action, str):
        return Skip("not_a_verdict")
    assert isinstance(citation_id, str)
    if action not in ACTION_FIELDS:
        return Skip(action if action in ("keep", "fix_record") else "unknown_action", citation_id)
    expected = _expected(verdict)
    if expected is None:
        return Skip("no_cited", citation_id)  # a sweep before verdicts said what they saw
    after: dict[str, Any]
    if action == "rewrite_offsets":
        repair = verdict.get("repair")
        skipped = _refused_repair(repair, policy)
        if skipped is not None:
            return Skip(skipped, citation_id)
        assert isinstance(repair, dict)
        after = {"chunk_id": repair["chunk_id"], "chunk_span": list(repair["chunk_span"])}
    elif action == "pin_archived_version":
        if not _is_id(verdict.get("recorded_version")):
            return Skip("not_a_verdict", citation_id)
        after = {"pinned_version": verdict["recorded_version"]}
    elif action == "suppress_claim" and policy.never_suppress:
        return Skip("policy_never_suppress", citation_id)
    else:
        after = {ACTION_FIELDS[action][0]: True}
    return Change(citation_id, action, expected, after)


def _expected(verdict: dict[str, Any]) -> Expected | None:
    cited = verdict.get("cited")
    if not isinstance(cited, dict):
        return None
    chunk_id, span, digest = (
        cited.get("chunk_id"),
        cited.get("chunk_span"),
        cited.get("quote_sha256"),
    )
    if not (_is_id(chunk_id) and isinstance(digest, str) and _is_span(span)):
        return None
    assert isinstance(span, list) and isinstance(chunk_id, str)
    version = verdict.get("recorded_version")
    held_version = version if isinstance(version, str) else None
    return Expected(chunk_id, (span[0], span[1]), held_version, digest)


# what a span's integers may be: an integer column's (PostgreSQL's integer, 32 bits)
MAX_OFFSET = 2**31 - 1


def _is_span(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(type(v) is int and 0 <= v <= MAX_OFFSET for v in value)
        and value[0] <= value[1]
    )


def _is_id(value: Any) -> bool:
    """An id a table or an archive can hold: text, not empty, no NUL, bounded."""
    return isinstance(value, str) and 0 < len(value) <= 1024 and "\x00" not in value


def _refused_repair(repair: Any, policy: ApplyPolicy) -> str | None:
    if not isinstance(repair, dict) or not _is_id(repair.get("chunk_id")):
        return "no_repair"
    if not _is_span(repair.get("chunk_span")):
        return "no_repair"
    if policy.repairs_how and repair.get("how") not in policy.repairs_how:
        return "policy_how"
    similarity = repair.get("similarity")
    if isinstance(similarity, (int, float)) and similarity < policy.min_similarity:
        return "policy_similarity"
    return None


@dataclass(frozen=True, slots=True)
class Held:
    """A stored citation as the target reads it: the fields a change compares and writes."""

    chunk_id: Any
    chunk_span: Any
    doc_version: Any
    quote: Any
    marks: Mapping[str, Any] = field(default_factory=dict)


def decide(change: Change, held: Held) -> Decision:
    """Apply ``change`` to the citation as it is now, or not: ``already`` when it holds what
    the change writes (and still the quote the sweep saw), ``conflict`` when it no longer holds
    what the sweep saw."""
    expected = change.expected
    quote_ok = isinstance(held.quote, str) and quote_sha256(held.quote) == expected.quote_sha256
    span = _span(held.chunk_span)
    version_ok = expected.doc_version is None or held.doc_version == expected.doc_version
    if change.action == "rewrite_offsets":
        after_span = tuple(change.after["chunk_span"])
        if (
            quote_ok
            and version_ok
            and held.chunk_id == change.after["chunk_id"]
            and span == after_span
        ):
            return "already"
    elif (
        quote_ok
        and version_ok
        and all(held.marks.get(name) == value for name, value in change.after.items())
    ):
        return "already"
    if (
        quote_ok
        and version_ok
        and held.chunk_id == expected.chunk_id
        and span == expected.chunk_span
    ):
        return "apply"
    return "conflict"


def _span(value: Any) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return (value[0], value[1])
    return None


# Conflicts and citations not found listed by id in a tally (all are counted); changes shown
# as examples, per action.
LISTED = 10
EXAMPLES = 2


@dataclass(slots=True)
class Tally:
    """What an apply did (or would do): decisions per action, skips per reason, and the
    first conflicts and citations not found, by id."""

    decisions: dict[tuple[str, str], int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    not_found: int = 0
    not_found_ids: list[str] = field(default_factory=list)
    # the first changes of each action, to show what an apply does before it is committed
    examples: list[Change] = field(default_factory=list)

    def decided(self, change: Change, decision: str) -> None:
        key = (change.action, decision)
        self.decisions[key] = self.decisions.get(key, 0) + 1
        if decision == "conflict" and len(self.conflicts) < LISTED:
            self.conflicts.append(change.citation_id)
        if decision == "apply" and self.decisions[key] <= EXAMPLES:
            self.examples.append(change)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def missing(self, citation_id: str) -> None:
        self.not_found += 1
        if len(self.not_found_ids) < LISTED:
            self.not_found_ids.append(citation_id)

    def count(self, decision: str) -> int:
        return sum(n for (_, made), n in self.decisions.items() if made == decision)


def written(change: Change, sweep: str, now: str) -> dict[str, Any]:
    """The fields a change writes: its action's, and which sweep and when."""
    return {**change.after, "repair_sweep": sweep, "repaired_at": now}
