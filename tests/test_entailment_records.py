"""The entailment types and the record a judged citation is written as."""

from __future__ import annotations

import json

import pytest

from exporter.checks.verdict import Action, Status, Verdict
from exporter.entailment.results import (
    EntailmentAction,
    EntailmentResult,
    Judgement,
    entailment_action,
)
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


def test_judgements_are_counted_with_the_model_judges_cost_tokens_and_time() -> None:
    from prometheus_client import CollectorRegistry

    from exporter.outputs.metrics import ExporterMetrics, SourceLabels
    from exporter.pipeline.outcome import Mode

    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "t")
    lexical = Judgement(EntailmentResult.NOT_ENTAILED, "lexical", "30 vs 60", seconds=0.00001)
    model = Judgement(
        EntailmentResult.ENTAILED,
        "openai",
        seconds=0.2,
        cost_usd=0.0004,
        prompt_tokens=700,
        completion_tokens=2,
    )
    skipped = Judgement(EntailmentResult.SKIPPED, "openai", "budget")
    metrics.judged(Mode.SWEEP, [lexical, model, model, skipped], [False, True, True, False])
    metrics.dropped("queue_full", 3)

    def sample(name: str, **labels: str) -> float:
        value = registry.get_sample_value(name, labels)
        assert value is not None, (name, labels)
        return value

    checks = "citation_entailment_checks_total"
    assert sample(checks, mode="sweep", judge="lexical", result="not_entailed") == 1
    assert sample(checks, mode="sweep", judge="openai", result="entailed") == 2
    assert sample(checks, mode="sweep", judge="openai", result="skipped") == 1
    assert sample(checks, mode="inline", judge="openai", result="error") == 0  # born at 0
    assert sample("citation_entailment_cost_dollars_total", mode="sweep") == pytest.approx(0.0008)
    tokens = "citation_entailment_tokens_total"
    assert sample(tokens, mode="sweep", direction="prompt") == 1400
    assert sample(tokens, mode="sweep", direction="completion") == 4
    assert sample("citation_entailment_duration_seconds_count", judge="openai") == 2
    assert sample("citation_entailment_duration_seconds_count", judge="lexical") == 0
    assert sample("citation_entailment_dropped_total", reason="queue_full") == 3
    assert sample("citation_entailment_dropped_total", reason="budget") == 0
    assert sample("citation_entailment_queue_depth") == 0
