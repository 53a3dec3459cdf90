"""The judged sample of a sweep, as a person reads it: its JSON and its lines of the summary."""

from __future__ import annotations

from typing import Any

from exporter.entailment.results import EntailmentResult
from exporter.entailment.summary import EntailmentSummary

__all__ = ["entailment_json", "entailment_lines"]


def entailment_json(summary: EntailmentSummary) -> dict[str, Any]:
    strata = [
        {
            "age": stratum.age,
            "family": stratum.family,
            "total": total,
            "sampled": summary.sampled[stratum],
            "results": {
                result.value: summary.results[stratum, result.value]
                for result in EntailmentResult
                if summary.results[stratum, result.value]
            },
        }
        for stratum, total in sorted(summary.totals.items())
    ]
    return {
        "judge": summary.judge,
        "sample_size": summary.sample_size,
        "judgeable": summary.judgeable,
        "sampled": sum(summary.sampled.values()),
        "results": {result.value: summary.result_count(result) for result in EntailmentResult},
        "decided_by": dict(sorted(summary.deciding.items())),
        "skipped_because": dict(summary.skipped_because.most_common()),
        "strata": strata,
        "calls": summary.calls,
        "tokens": {"prompt": summary.prompt_tokens, "completion": summary.completion_tokens},
        "cost_usd": round(summary.cost_usd, 6),
        "judge_seconds": round(summary.judge_seconds, 3),
        "wall_seconds": round(summary.wall_seconds, 3),
        "whole_archive": {
            key: round(value, 4) if isinstance(value, float) else value
            for key, value in summary.projection().items()
        },
    }


def entailment_lines(summary: EntailmentSummary) -> list[str]:
    sampled = sum(summary.sampled.values())
    if not summary.judgeable:
        return ["", "  entailment: no judgeable citation (none named its claim)"]
    results = ", ".join(
        f"{result.value} {summary.result_count(result):,}"
        for result in EntailmentResult
        if summary.result_count(result)
    )
    lines = [
        "",
        f"  entailment ({summary.judge}): {sampled:,} of {summary.judgeable:,} judgeable citations "
        f"sampled over {len(summary.totals)} strata: {results or 'none judged'}",
    ]
    if summary.calls:
        whole = summary.projection()
        lines += [
            f"    model judge: {summary.calls:,} calls, {summary.prompt_tokens:,} + "
            f"{summary.completion_tokens:,} tokens, ${summary.cost_usd:,.4f}, "
            f"{summary.wall_seconds:,.1f} s",
            f"    the whole archive would take {whole['calls']:,} calls, "
            f"{_duration(whole['hours'] * 3600)} at concurrency {summary.concurrency}, "
            f"${whole['usd']:,.2f}",
        ]
    if summary.skipped_because:
        # the reasons are the sweep's own words (budget, evidence gone), not a record's
        common = summary.skipped_because.most_common(3)
        because = ", ".join(f"{reason} {count:,}" for reason, count in common)
        lines.append(f"    skipped: {because}")
    not_entailed = summary.result_count(EntailmentResult.NOT_ENTAILED)
    if not_entailed:
        lines.append(
            f"    {not_entailed:,} not entailed: a prompt to look (a judge errs), not a verdict"
        )
    return lines


def _duration(seconds: float) -> str:
    """A time as people say it: seconds, minutes or hours."""
    if seconds < 90:
        return f"{seconds:,.0f} s"
    if seconds < 5_400:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds / 3600:,.1f} hours"
