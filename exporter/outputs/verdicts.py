"""Verdicts as JSON: the records the serving side acts on, one per input citation, and one per
result of a plug-in check, which names it (``"check": "coverage"`` for an answer whose coverage
was judged); a verdict without ``check`` is a citation's."""

from __future__ import annotations

import json
from typing import Any

import orjson

from exporter.checks.evidence import Evidence
from exporter.checks.plugins import CheckResult
from exporter.checks.verdict import Verdict
from exporter.entailment.results import EntailmentAction, Judgement

__all__ = [
    "entailment_json",
    "entailment_record",
    "result_record",
    "verdict_json",
    "verdict_key",
    "verdict_record",
]


def entailment_record(
    verdict: Verdict, judgement: Judgement, action: EntailmentAction, **where: Any
) -> dict[str, Any]:
    """A judged citation: its verdict, ``"check": "entailment"``, and what the judge said."""
    record = verdict_record(verdict)
    record["check"] = "entailment"
    record["entailment"] = {
        "result": judgement.result,
        "action": action,
        "judge": judgement.judge,
        "reason": judgement.reason,
        "seconds": round(judgement.seconds, 4),
        "cost_usd": round(judgement.cost_usd, 8),
    }
    record.update(where)
    return record


def entailment_json(
    verdict: Verdict, judgement: Judgement, action: EntailmentAction, **where: Any
) -> bytes:
    """One JSONL line of a judged citation (keyed, on Kafka, by its ``citation_id``)."""
    return orjson.dumps(
        entailment_record(verdict, judgement, action, **where), option=orjson.OPT_APPEND_NEWLINE
    )


def result_record(result: CheckResult, **where: Any) -> dict[str, Any]:
    """A plug-in check's result as a JSON-ready dict; ``where`` adds provenance, each key the
    result's own record already holds written as ``source_<key>`` (coverage's ``topic`` is the
    answer's, so a Kafka provenance ``topic`` is written as ``source_topic``, the name the dead
    letters' headers use)."""
    record = result.record()
    for key, value in where.items():
        record[f"source_{key}" if key in record else key] = value
    return record


def verdict_key(verdict: Verdict | CheckResult) -> bytes:
    """The Kafka key of a published verdict: its citation's id, or what a check's result says
    (a coverage verdict's answer)."""
    if isinstance(verdict, Verdict):
        return (verdict.citation_id or "").encode()
    return verdict.key()


def verdict_record(
    verdict: Verdict, evidence: Evidence | None = None, **where: Any
) -> dict[str, Any]:
    """The verdict as a JSON-ready dict; ``where`` adds provenance (file, line, offset...);
    ``evidence``, when kept, what a drifted citation's quote and spans hold."""
    repair = verdict.repair
    record: dict[str, Any] = {
        "citation_id": verdict.citation_id,
        "answer_id": verdict.answer_id,
        "doc_id": verdict.doc_id,
        "status": verdict.status,
        "reason": verdict.reason,
        "failed_check": verdict.failed_check,
        "similarity": None if verdict.similarity is None else round(verdict.similarity, 2),
        "recorded_version": verdict.recorded_version,
        "live_version": verdict.live_version,
        "action": verdict.action,
        "source": verdict.source,
        "repair": None
        if repair is None
        else {
            "chunk_id": repair.chunk_id,
            "chunk_span": [repair.start, repair.end],
            "similarity": round(repair.similarity, 2),
            "method": repair.method,
            "how": repair.how,
            "shift": repair.shift,
        },
    }
    cited = verdict.cited
    if cited is not None:  # what apply expects the stored citation to hold still
        record["cited"] = {
            "chunk_id": cited.chunk_id,
            "chunk_span": [cited.start, cited.end],
            "quote_sha256": cited.quote_sha256,
        }
    if verdict.error is not None:
        record["error"] = verdict.error
    if evidence is not None:
        record["evidence"] = {
            "quote": evidence.quote,
            "recorded": evidence.recorded,
            "found": evidence.found,
        }
    record.update(where)
    return record


def verdict_json(
    verdict: Verdict | CheckResult, evidence: Evidence | None = None, **where: Any
) -> bytes:
    """One JSONL line (with its newline).

    orjson writes integers of 64 bits at most; the decoder bounds every offset well below that,
    and should any value still be beyond orjson, the standard library writes the line instead:
    a verdict that cannot be written would be a record that stops the monitor.
    """
    if isinstance(verdict, Verdict):
        record = verdict_record(verdict, evidence, **where)
    else:
        record = result_record(verdict, **where)
    try:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json.dumps(record).encode("ascii") + b"\n"
