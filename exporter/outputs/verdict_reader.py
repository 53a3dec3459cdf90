"""Verdict files read back, for a report drawn from an earlier sweep's output.

A verdict file is an input like any other here: it may be another version's, truncated, edited
by hand or made to hurt. Each record is checked for the fields a report uses, of the types and
values a sweep writes; every text kept is cut short; a record that is not one is refused with
one short reason, and the caller counts it and goes on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from exporter.checks.coverage import CoverageSummary
from exporter.checks.evidence import EVIDENCE_CHARS, Evidence
from exporter.checks.relocate import BY_CONTEXT, BY_POSITION_HINT, UNIQUE, UNREPAIRED_OUTCOMES
from exporter.checks.verdict import Action, FailedCheck, Repair, Status, Verdict
from exporter.entailment.results import EntailmentResult
from exporter.entailment.sampling import AGE_BANDS, FAMILIES
from exporter.records.decode import MAX_OFFSET

__all__ = ["JudgedRecords", "add_coverage_record", "verdict_from_record"]

# an id, a version, a reason or a source is kept up to this many characters
_TEXT_KEPT = 500
_STATUSES = {status.value: status for status in Status}
_ACTIONS = {action.value: action for action in Action}
_RESULTS = tuple(result.value for result in EntailmentResult)
# the reasons and repair methods a sweep writes; any other (a newer version's, or made up) is
# counted as "other": a free-text value would make a group of its own in the page and memory
_REASONS = frozenset(
    {check.value for check in FailedCheck}
    | set(UNREPAIRED_OUTCOMES)
    | {"document_missing", "invalid_json", "invalid_record", "oversized", "check_failed"}
)
_METHODS = frozenset({"exact", "normalised", "fuzzy"})
_HOWS = frozenset({UNIQUE, BY_CONTEXT, BY_POSITION_HINT})
OTHER = "other"
_JUDGES_KEPT = 5


def _text(record: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = record.get(name)
    if value is None and not required:
        return None
    if type(value) is not str:
        raise ValueError(f"'{name}' is not a string")
    return value[:_TEXT_KEPT]


def _integer(value: object, name: str, low: int = -MAX_OFFSET) -> int:
    if type(value) is not int or not low <= value <= MAX_OFFSET:
        raise ValueError(f"'{name}' is not an integer in range")
    return value


def _repair(value: object) -> Repair | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise ValueError("'repair' is not an object")
    span = value.get("chunk_span")
    if type(span) is not list or len(span) != 2:
        raise ValueError("'repair.chunk_span' is not [start, end]")
    shift = value.get("shift")
    similarity = value.get("similarity")
    if type(similarity) is not int and type(similarity) is not float:
        raise ValueError("'repair.similarity' is not a number")
    method = _text(value, "method", required=True)
    chunk_id = _text(value, "chunk_id", required=True)
    assert method is not None and chunk_id is not None
    method = method if method in _METHODS else OTHER
    how = _text(value, "how") or UNIQUE  # verdicts written before hints existed have none
    return Repair(
        chunk_id,
        _integer(span[0], "repair.chunk_span", 0),
        _integer(span[1], "repair.chunk_span", 0),
        float(similarity),
        method,
        None if shift is None else _integer(shift, "repair.shift"),
        how if how in _HOWS else OTHER,
    )


def _evidence(value: object) -> Evidence | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise ValueError("'evidence' is not an object")
    texts = []
    for name in ("quote", "recorded", "found"):
        text = value.get(name)
        if text is not None and type(text) is not str:
            raise ValueError(f"'evidence.{name}' is not a string")
        texts.append(None if text is None else text[:EVIDENCE_CHARS])
    return Evidence(texts[0] or "", texts[1], texts[2])


def verdict_from_record(record: object) -> tuple[Verdict, Evidence | None]:
    """A citation verdict record (as :func:`~exporter.outputs.verdicts.verdict_record` writes
    it) as a Verdict and its evidence; ValueError says what is wrong with it."""
    if type(record) is not dict:
        raise ValueError("not a JSON object")
    status_value, action_value = record.get("status"), record.get("action")
    status = _STATUSES.get(status_value) if type(status_value) is str else None
    if status is None:
        raise ValueError("'status' is not a verdict status")
    action = _ACTIONS.get(action_value) if type(action_value) is str else None
    if action is None:
        raise ValueError("'action' is not a verdict action")
    reason = _text(record, "reason")
    if status is not Status.OK and reason not in _REASONS:
        reason = OTHER  # None too: every failure has a reason, the page counts by it
    repair = _repair(record.get("repair"))
    if status is Status.DRIFT_REPAIRED and repair is None:
        raise ValueError("a drift_repaired verdict without 'repair'")
    verdict = Verdict(
        _text(record, "citation_id"),
        _text(record, "answer_id"),
        _text(record, "doc_id"),
        status,
        action,
        reason=reason,
        recorded_version=_text(record, "recorded_version"),
        live_version=_text(record, "live_version"),
        repair=repair,
        source=_text(record, "source"),
        error=_text(record, "error"),
    )
    return verdict, _evidence(record.get("evidence"))


def add_coverage_record(coverage: CoverageSummary, record: dict[str, Any]) -> None:
    """Count a coverage verdict record (``"check": "coverage"``) into ``coverage``."""
    if record.get("status") == "invalid":
        coverage.invalid += 1
        return
    lists = {}
    for name in ("claims", "framing", "uncited"):
        value = record.get(name)
        if type(value) is not list:
            raise ValueError(f"'{name}' is not a list")
        lists[name] = len(value)
    unjudged = record.get("unjudged", [])  # absent from the files of older versions
    if type(unjudged) is not list:
        raise ValueError("'unjudged' is not a list")
    coverage.answers += 1
    coverage.claims += lists["claims"]
    coverage.framing += lists["framing"]
    if unjudged:
        coverage.unjudged += len(unjudged)
        coverage.answers_unjudged += 1
    if lists["uncited"]:
        coverage.uncited += lists["uncited"]
        coverage.answers_uncited += 1
        topic = record.get("topic")
        coverage.count_topic(topic[:_TEXT_KEPT] if type(topic) is str else "", lists["uncited"])


@dataclass
class JudgedRecords:
    """The judged sample of a sweep, counted from its ``--judge-out`` records (``"check":
    "entailment"``): per stratum, how many were judged and what came of them. The judgeable
    totals are not in those records: only a sweep's own report has them."""

    sampled: Counter[tuple[str, str]] = field(default_factory=Counter)
    results: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    judges: Counter[str] = field(default_factory=Counter)

    def add(self, record: dict[str, Any]) -> None:
        stratum, entailment = record.get("stratum"), record.get("entailment")
        if type(stratum) is not dict or type(entailment) is not dict:
            raise ValueError("'stratum' or 'entailment' is not an object")
        age, family = stratum.get("age"), stratum.get("family")
        if age not in AGE_BANDS or family not in FAMILIES:
            raise ValueError("'stratum' names no stratum of a sweep's sample")
        result = entailment.get("result")
        if result not in _RESULTS:
            raise ValueError("'entailment.result' is not a judge's result")
        judge = entailment.get("judge")
        self.sampled[age, family] += 1
        self.results[age, family, result] += 1
        if type(judge) is str and (judge in self.judges or len(self.judges) < _JUDGES_KEPT):
            self.judges[judge[:_TEXT_KEPT]] += 1

    def to_json(self) -> dict[str, Any] | None:
        """As the report's entailment section reads a summary's (None when nothing was read)."""
        if not self.sampled:
            return None
        results: Counter[str] = Counter()
        for (_age, _family, result), count in self.results.items():
            results[result] += count
        return {
            "judge": "+".join(sorted(self.judges)) or "unknown",
            "judgeable": None,
            "sampled": sum(self.sampled.values()),
            "results": {r: results[r] for r in _RESULTS if results[r]},
            "strata": [
                {
                    "age": age,
                    "family": family,
                    "total": None,
                    "sampled": count,
                    "results": {
                        r: self.results[age, family, r]
                        for r in _RESULTS
                        if self.results[age, family, r]
                    },
                }
                for (age, family), count in sorted(self.sampled.items())
            ],
        }
