"""Entailment: does a citation's evidence establish the claim it is attached to?

A quote can sit exactly where it was recorded and still not support its sentence ("refunds
within 30 days" cited for "refunds within 60 days"). A *judge* decides: the offline ``lexical``
judge (plain disagreements only: numbers, amounts, dates, durations, negations) runs first in
every mode, and a model-backed judge is asked only what it cannot settle. A judge errs, so
``not_entailed`` is a prompt to look, not a verdict. These are the types every judge returns and
every output reads; no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = [
    "CLAIM_CHARS_KEPT",
    "AsyncJudge",
    "EntailmentAction",
    "EntailmentResult",
    "Judgement",
    "SyncJudge",
    "entailment_action",
    "kept_claim",
    "settled",
]

# The most of a claim kept for a judge: the lexical judge reads at most 1,000 characters (a
# longer claim is unknown to it), and a sentence of thousands is not a sentence a model should
# be paid to read whole. A sweep's sample holds thousands of claims at once: this bounds it.
CLAIM_CHARS_KEPT = 2_000
_CUT = " [truncated]"


def kept_claim(claim: str) -> str:
    """The claim a judge is given: whole, or its first CLAIM_CHARS_KEPT characters, marked."""
    return claim if len(claim) <= CLAIM_CHARS_KEPT else claim[:CLAIM_CHARS_KEPT] + _CUT


class EntailmentResult(StrEnum):
    """What judging one claim against its evidence came to."""

    ENTAILED = "entailed"
    NOT_ENTAILED = "not_entailed"
    UNKNOWN = "unknown"  # the judge could not tell
    ERROR = "error"  # no usable answer after retries
    SKIPPED = "skipped"  # sampled but not judged: budget, queue, no endpoint


class EntailmentAction(StrEnum):
    KEEP = "keep"
    FLAG_FOR_REVIEW = "flag_for_review"
    SUPPRESS_CLAIM = "suppress_claim"


@dataclass(frozen=True, slots=True)
class Judgement:
    """One judge's answer for one citation, and what it cost.

    ``judge`` names the judge that decided (``lexical``, ``openai``); ``reason`` is a short,
    bounded explanation (``number 30 vs 60``, ``timeout``, ``budget``); tokens and cost are
    zero for a judge that calls nothing.
    """

    result: EntailmentResult
    judge: str
    reason: str | None = None
    seconds: float = 0.0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class SyncJudge(Protocol):
    """A judge that decides in-process, in microseconds (the lexical judge)."""

    name: str

    def judge(self, claim: str, evidence: str) -> Judgement: ...


class AsyncJudge(Protocol):
    """A judge behind a network call (a model endpoint): awaited, never raising for anything
    the endpoint does (every failure is a :class:`Judgement` with result ``error``)."""

    name: str

    async def judge(self, claim: str, evidence: str) -> Judgement: ...


def settled(judgement: Judgement) -> bool:
    """Whether a judgement stands, so the model judge is not asked: the lexical judge's
    entailed and not_entailed are final; its unknown is the model's to decide."""
    return judgement.result in _SETTLED


_SETTLED = frozenset({EntailmentResult.NOT_ENTAILED, EntailmentResult.ENTAILED})


def entailment_action(
    result: EntailmentResult, topic: str | None, high_severity_topics: frozenset[str]
) -> EntailmentAction:
    """``suppress_claim`` for a not-entailed claim on a high-severity topic, ``flag_for_review``
    for another not-entailed one, else ``keep`` (unknown, error and skipped decide nothing)."""
    if result is not EntailmentResult.NOT_ENTAILED:
        return EntailmentAction.KEEP
    if topic is not None and topic in high_severity_topics:
        return EntailmentAction.SUPPRESS_CLAIM
    return EntailmentAction.FLAG_FOR_REVIEW
