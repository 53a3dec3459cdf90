"""One message of citations in (a Kafka message or a line of a file), its Outcome out.

Inline checking, sweeps over the answer topic, replays and the offline file sweep all judge a
message here, so they judge it the same way. Every citation in a message yields a verdict, in
input order; the invalid ones are also listed in the message's one dead letter. Nothing is
dropped, and nothing a message holds can stop the process (a check that raises is reported as
``check_failed``, like a bad record). No I/O here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from exporter.checks.engine import Policy, check_or_report, invalid_verdict
from exporter.checks.evidence import drift_evidence
from exporter.checks.plugins import AnswerContext, CheckResult, run_guarded
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.entailment.results import CLAIM_CHARS_KEPT, kept_claim
from exporter.entailment.sampling import KEY_SPACE, sample_key
from exporter.pipeline.outcome import (
    CheckedCitation,
    DeadLetter,
    JudgeInput,
    Mode,
    Origin,
    Outcome,
    evidence_crc,
)
from exporter.records.decode import InvalidJson, decode_citations, parse_json
from exporter.records.limits import Limits, bounded
from exporter.records.schema import Citation, InvalidCitation

__all__ = ["check_message", "oversized", "unread", "unusable"]

# A dead letter lists the errors of at most this many of its invalid citations (all are counted
# in its headers); the error stays one short line however many there are.
_ERRORS_LISTED = 3


def oversized(origin: Origin, value: bytes, key: bytes | None, max_bytes: int) -> DeadLetter:
    """The dead letter of a message above max_message_bytes, with its head (the whole message
    stays on its source topic; the head is enough to find its producer)."""
    return DeadLetter(
        origin,
        value[:max_bytes],
        key,
        "oversized",
        f"message of {len(value):,} bytes exceeds max_message_bytes={max_bytes:,} "
        "(value truncated in the dead letter)",
        truncated_from=len(value),
    )


def unusable(letter: DeadLetter, mode: Mode = Mode.INLINE) -> Outcome:
    """The outcome of a message that could not be used at all: one invalid citation for it."""
    checked = [CheckedCitation(invalid_verdict(item)) for item in letter.invalid_citations()]
    return Outcome(letter.origin, mode, checked, letter)


def unread(origin: Origin, error: str, mode: Mode = Mode.INLINE) -> Outcome:
    """The outcome of a line too large to read (its bytes were never held)."""
    return unusable(DeadLetter(origin, None, None, "oversized", error), mode)


def _letter(
    origin: Origin,
    value: bytes,
    key: bytes | None,
    invalid: list[InvalidCitation],
    results: list[CheckResult],
) -> DeadLetter | None:
    """One dead letter for every invalid citation of a message, however many, and for every
    result a check could not judge (unusable sentences, a plug-in that raised); None when there
    is nothing wrong."""
    if not invalid and not results:
        return None  # nearly every message: nothing to list
    reason = invalid[0].reason if invalid else "invalid_record"
    unjudged = [(result.check, u) for result in results if (u := result.unusable) is not None]
    parts = [f"{check}: {unusable.error}" for check, unusable in unjudged]
    if unjudged:
        reason = unjudged[0][1].reason
    if invalid:
        listed = "; ".join(
            f"#{item.index}: {item.error}" if item.index is not None else item.error
            for item in invalid[:_ERRORS_LISTED]
        )
        if len(invalid) > 1 or invalid[0].index is not None:
            more = len(invalid) - _ERRORS_LISTED
            listed = f"{len(invalid)} invalid citations: {listed}" + (
                f"; and {more} more" if more > 0 else ""
            )
        parts.append(listed)
        reason = invalid[0].reason  # the citations' reason first: their counts key on it
    if not parts:
        return None
    # what raised first, in the order the error lists them: the checks' inputs, the citations
    raised = [unusable.exception for _, unusable in unjudged]
    raised += [item.exception for item in invalid[:_ERRORS_LISTED]]
    exception = next((name for name in raised if name is not None), None)
    return DeadLetter(
        origin,
        value,
        key,
        reason,
        bounded("; ".join(parts)),
        tuple(invalid),
        bool(unjudged),
        exception=exception,
    )


def _sampled(rate: float, origin: Origin, index: int) -> bool:
    """Whether the ``index``-th citation of a message is in the judge's sample: decided by
    the sample key of where it came from, so the same message is sampled alike wherever it
    is checked."""
    if rate >= 1.0:
        return True
    return sample_key(origin.partition, origin.offset, index) < rate * KEY_SPACE


def _answer_fields(parsed: object) -> tuple[list[Any] | None, str | None]:
    """An answer event's sentences and emitted_at, which its citations' claims and ages come
    from (read once per message)."""
    if type(parsed) is not dict:
        return None, None
    sentences, emitted_at = parsed.get("sentences"), parsed.get("emitted_at")
    return (
        sentences if type(sentences) is list else None,
        emitted_at if type(emitted_at) is str else None,
    )


def _judge_input(
    citation: Citation,
    verdict: Verdict,
    answer: tuple[list[Any] | None, str | None],
    store: ChunkStore,
) -> JudgeInput | None:
    """The claim and the live evidence of a citation the judge may be asked about: one whose
    span holds its quote, or was repaired to one that does, and that names its claim (its own
    ``claim``, or its answer's sentence). Superseded, missing and unrepaired ones are not."""
    if verdict.status is Status.OK:
        chunk_id, start, end = citation.chunk_id, citation.start, citation.end
    elif verdict.status is Status.DRIFT_REPAIRED and verdict.repair is not None:
        repair = verdict.repair
        chunk_id, start, end = repair.chunk_id, repair.start, repair.end
    else:
        return None
    sentences, answered_at = answer
    claim = citation.claim
    emitted_at = citation.emitted_at if citation.emitted_at is not None else answered_at
    index = citation.sentence_index
    if claim is None and index is not None and sentences is not None and index < len(sentences):
        sentence = sentences[index]
        claim = sentence if type(sentence) is str else None
    # blank where a judge reads it (its first CLAIM_CHARS_KEPT characters): nothing to judge.
    # Read no further: an answer's citations may all name one huge sentence
    if claim is None or not claim[:CLAIM_CHARS_KEPT].strip():
        return None
    chunk = store.chunk(chunk_id)
    if chunk is None:  # not for a span just found to hold the quote
        return None
    return JudgeInput(
        kept_claim(claim),
        chunk_id,
        start,
        end,
        emitted_at,
        citation.topic,
        len(citation.quote),
        evidence_crc(chunk.text[start:end]),
    )


def _answer_results(
    parsed: dict[str, Any],
    checked: list[CheckedCitation],
    policy: Policy,
    *,
    cited: set[int],
    unreadable: int,
    header_checked: bool,
) -> list[CheckResult]:
    """What the policy's per-answer checks (coverage first) said of one answer event."""
    answer = AnswerContext(parsed, policy.limits, cited, unreadable, header_checked, checked)
    results: list[CheckResult] = []
    for check in policy.answer_checks:
        result = run_guarded(check, answer.answer_id, answer)
        if result is not None:
            results.append(result)
    return results


def _citation_results(
    citation: Citation, verdict: Verdict, store: ChunkStore, policy: Policy
) -> Iterator[CheckResult]:
    """What the policy's per-citation plug-in checks said of one checked citation."""
    for check in policy.citation_plugins:
        result = run_guarded(check, citation.citation_id, citation, verdict, store)
        if result is not None:
            yield result


def check_message(
    value: bytes | None,
    key: bytes | None,
    origin: Origin,
    *,
    store: ChunkStore,
    policy: Policy,
    mode: Mode = Mode.INLINE,
) -> Outcome:
    """Decode and check every citation of one message, in order; invalid ones in its dead letter.

    Never raises for what the message holds: a check that raises is reported for its citation,
    and anything else that raises (a decoder bug) makes the whole message ``check_failed``.
    """
    try:
        return _check(value, key, origin, store, policy, mode)
    except Exception as exc:  # nothing one message holds may stop the checks
        letter = DeadLetter.raised(origin, value, key, exc)
        return unusable(letter, mode)


def parse_message(
    value: bytes | None, key: bytes | None, origin: Origin, max_bytes: int, mode: Mode
) -> object:
    """A message's JSON value, or the :class:`Outcome` of a message that cannot be read: no
    value (a tombstone), more than ``max_bytes``, not JSON. The first step of every check of a
    message, whichever engine runs it."""
    if value is None:
        letter = DeadLetter(origin, value, key, "empty", "message has no value (a tombstone?)")
        return unusable(letter, mode)
    if len(value) > max_bytes:
        return unusable(oversized(origin, value, key, max_bytes), mode)
    try:
        return parse_json(value)
    except InvalidJson as exc:
        return unusable(DeadLetter(origin, value, key, "invalid_json", str(exc)), mode)


def message_citations(
    parsed: object, limits: Limits
) -> Iterator[tuple[int | None, Citation | InvalidCitation]]:
    """Each citation of a message's JSON, in order, decoded (or invalid, with its reason), with
    its position in its answer event (None for a lone citation record). The second step of
    every check of a message, whichever engine runs it."""
    in_answer = type(parsed) is dict and "citations" in parsed
    for index, item in enumerate(decode_citations(parsed, limits)):
        yield (index if in_answer else None), item


def _check(  # noqa: PLR0917 - the private body of check_message, called once
    value: bytes | None,
    key: bytes | None,
    origin: Origin,
    store: ChunkStore,
    policy: Policy,
    mode: Mode,
) -> Outcome:
    parsed = parse_message(value, key, origin, policy.limits.max_message_bytes, mode)
    if isinstance(parsed, Outcome):
        return parsed
    assert value is not None  # parse_message read it
    checked: list[CheckedCitation] = []
    invalid: list[InvalidCitation] = []
    cited: set[int] = set()  # sentences named by a citation that could be decoded
    decoded = False  # some citation of the answer could be decoded: its header is good
    in_answer = type(parsed) is dict and "citations" in parsed
    judge_rate = policy.judge_rate
    answer = _answer_fields(parsed) if judge_rate else (None, None)
    # the check time is a metric of inline checks only: a sweep does not read the clock
    clock = time.perf_counter if mode is Mode.INLINE else None
    results: list[CheckResult] = []
    plugins = policy.citation_plugins
    # message_citations, without its generator in between (a frame per citation)
    for index, item in enumerate(decode_citations(parsed, policy.limits)):
        position = index if in_answer else None
        if type(item) is Citation:
            decoded = True
            if item.sentence_index is not None:
                cited.add(item.sentence_index)
            started = clock() if clock is not None else 0.0
            outcome = check_or_report(item, store, policy, position)
            if isinstance(outcome, InvalidCitation):
                invalid.append(outcome)
                checked.append(CheckedCitation(invalid_verdict(outcome), position))
            else:
                seconds = clock() - started if clock is not None else 0.0
                judge_input = (
                    _judge_input(item, outcome, answer, store)
                    if judge_rate and _sampled(judge_rate, origin, index)
                    else None
                )
                evidence = (
                    drift_evidence(item, outcome, store)
                    if policy.keep_evidence and outcome.is_drift
                    else None
                )
                checked.append(CheckedCitation(outcome, position, seconds, judge_input, evidence))
                if plugins:
                    results.extend(_citation_results(item, outcome, store, policy))
        else:
            assert isinstance(item, InvalidCitation)
            invalid.append(item)
            checked.append(CheckedCitation(invalid_verdict(item), item.index))
    if in_answer and policy.answer_checks:
        assert type(parsed) is dict
        results += _answer_results(
            parsed, checked, policy, cited=cited, unreadable=len(invalid), header_checked=decoded
        )
    dead_letter = _letter(origin, value, key, invalid, results)
    return Outcome(origin, mode, checked, dead_letter, results=results)
