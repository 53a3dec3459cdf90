"""The entailment types and the record a judged citation is written as."""

from __future__ import annotations

import json

import pytest

from exporter.checks.entailment import (
    EntailmentAction,
    EntailmentResult,
    Judgement,
    entailment_action,
)
from exporter.checks.verdict import Action, Status, Verdict
from exporter.outputs.verdicts import entailment_json

HIGH = frozenset({"legal", "pricing"})


@pytest.mark.parametrize(
    ("result", "topic", "action"),
    [
        (EntailmentResult.NOT_ENTAILED, "pricing", EntailmentAction.SUPPRESS_CLAIM),
        (EntailmentResult.NOT_ENTAILED, "billing", EntailmentAction.FLAG_FOR_REVIEW),
        (EntailmentResult.NOT_ENTAILED, None, EntailmentAction.FLAG_FOR_REVIEW),
        (EntailmentResult.ENTAILED, "pricing", EntailmentAction.KEEP),
        (EntailmentResult.UNKNOWN, "pricing", EntailmentAction.KEEP),
        (EntailmentResult.ERROR, "legal", EntailmentAction.KEEP),
        (EntailmentResult.SKIPPED, "legal", EntailmentAction.KEEP),
    ],
)
def test_only_a_not_entailed_claim_is_acted_on(
    result: EntailmentResult, topic: str | None, action: EntailmentAction
) -> None:
    assert entailment_action(result, topic, HIGH) is action


def test_a_judged_citation_on_the_wire() -> None:
    verdict = Verdict("c1", "a1", "d1", Status.OK, Action.KEEP, similarity=100.0)
    judgement = Judgement(
        EntailmentResult.NOT_ENTAILED,
        "lexical",
        "30 days vs 60 days",
        seconds=0.000012345,
        cost_usd=0.0,
    )
    line = entailment_json(verdict, judgement, EntailmentAction.FLAG_FOR_REVIEW, line=4)
    record = json.loads(line)
    assert line.endswith(b"\n")
    assert record["check"] == "entailment" and record["citation_id"] == "c1"
    assert record["status"] == "ok" and record["line"] == 4
    assert record["entailment"] == {
        "result": "not_entailed",
        "action": "flag_for_review",
        "judge": "lexical",
        "reason": "30 days vs 60 days",
        "seconds": 0.0,
        "cost_usd": 0.0,
    }
