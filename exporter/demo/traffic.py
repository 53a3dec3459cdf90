"""``citation-exporter demo``: the main job on built-in traffic, no Kafka needed.

The same pipeline as ``run`` is fed in-process with simulated traffic in three phases, a
baseline, then a chunk-size change on part of the store, then (the change rolled back, as the
runbook says) a content refresh of another part, while ``/metrics`` is served on its usual
port. The terminal shows, live, the drift and
superseded ratios over a sliding window against the alert thresholds, the shift clusters as
they form, and the share of claims no citation supports (coverage): drift jumps (and would page)
at the chunk-size change, superseded rises at the content refresh while drift does not. Claims
are judged for entailment by the lexical judge, and by a model judge when one is configured
(behind the traffic, see :mod:`exporter.demo.entailment`).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import orjson

from exporter import alerting
from exporter.checks.coverage import CoverageStatus
from exporter.checks.relocate import BY_POSITION_HINT
from exporter.checks.verdict import Status
from exporter.demo.entailment import DemoEntailment
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.outcome import Outcome
from exporter.pipeline.shifts import shift_clusters
from exporter.pipeline.summary import SweepSummary
from exporter.records.chunk_messages import chunk_message
from exporter.simulate.scenario import Scenario, ScenarioConfig, build_scenario

__all__ = ["DemoView", "demo_phases", "run_demo"]

# A share of the claims restated in other words: the lexical judge cannot settle them, so a
# model judge has something to answer (some 9 a second at the default pace).
REWORDED_SHARE = 0.05
# Citations that carry their position in the document: after the chunk-size change, the
# repeated quotes among them are repaired by it instead of degraded to a document link.
HINT_SHARE = 0.5
# Citations that store prefix and suffix: few, so that repeated quotes need the hint.
CONTEXT_SHARE = 0.2
# At the end, how long a model judge may take for the claims still waiting for it.
MODEL_WAIT_SECONDS = 3.0

# keys of the window's counts besides the citation statuses
_CLAIMS, _UNCITED = "coverage:claims", "coverage:uncited"


@dataclass(frozen=True)
class Phase:
    title: str
    chunks: list[LocalRecord]
    answers: list[LocalRecord]


def _json(record: dict[str, Any] | bytes) -> bytes:
    return record if isinstance(record, bytes) else orjson.dumps(record)


def demo_phases(scenario: Scenario, chunks_topic: str, answers_topic: str) -> list[Phase]:
    """Baseline, chunk-size change, content refresh: chunk updates then answers, per phase."""
    offset = iter(range(10**9))

    def chunk(record: dict[str, Any]) -> LocalRecord:
        message = chunk_message(_json(record))
        assert message is not None, "the scenario writes chunk records only"
        return LocalRecord(chunks_topic, 0, next(offset), *message)

    def change_of(record: dict[str, Any]) -> str:
        return scenario.doc_changes.get(record["chunk_id"].split("#", 1)[0], "none")

    def of_change(change: str) -> list[LocalRecord]:
        return [chunk(r) for r in scenario.chunk_updates if change_of(r) == change]

    # rolling the chunk-size change back re-sends the re-cut documents' original chunks
    rollback = [chunk(r) for r in scenario.chunks_before if change_of(r) == "resize"]

    answers = [
        LocalRecord(answers_topic, 0, next(offset), None, _json(line))
        for line in scenario.citation_lines
    ]
    third = len(answers) // 3
    return [
        Phase(
            "baseline traffic on the original store",
            [chunk(r) for r in scenario.chunks_before],
            answers[:third],
        ),
        Phase(
            "a chunk-size change re-cuts part of the store",
            of_change("resize"),
            answers[third : 2 * third],
        ),
        Phase(
            "the chunk-size change is rolled back; a vendor reissues other documents",
            rollback + of_change("refresh"),
            answers[2 * third :],
        ),
    ]


class DemoView:
    """Sliding-window ratios and shift clusters, rendered as a few lines of text."""

    def __init__(
        self,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        entailment: DemoEntailment | None = None,
    ) -> None:
        self._window = window_seconds
        self._clock = clock
        self._events: deque[tuple[float, Counter[str]]] = deque()
        self.summary = SweepSummary()
        self.entailment = entailment

    def add(self, outcome: Outcome) -> None:
        """Count one answer message: its citations' statuses, its claims and uncited claims."""
        if self.entailment is not None:
            self.entailment.add(outcome)
        counts = Counter(v.status.value for v in outcome.verdicts)
        coverage = outcome.coverage
        if coverage is not None and coverage.status is not CoverageStatus.INVALID:
            counts[_CLAIMS] = len(coverage.claims) - len(coverage.unjudged)
            counts[_UNCITED] = len(coverage.uncited)
        self._events.append((self._clock(), counts))

    def _window_counts(self) -> Counter[str]:
        now = self._clock()
        while self._events and now - self._events[0][0] > self._window:
            self._events.popleft()
        total: Counter[str] = Counter()
        for _, counts in self._events:
            total.update(counts)
        return total

    def ratios(self) -> tuple[int, float, float]:
        """(checks, drift ratio, superseded ratio) over the window."""
        total = self._window_counts()
        checks = sum(total[status] for status in Status)
        if not checks:
            return 0, 0.0, 0.0
        drift = total[Status.DRIFT_REPAIRED] + total[Status.DRIFT_UNREPAIRED]
        return checks, drift / checks, total[Status.SUPERSEDED] / checks

    def uncited_ratio(self) -> tuple[int, float]:
        """(claims, uncited claims per claim) over the window."""
        total = self._window_counts()
        claims = total[_CLAIMS]
        return claims, total[_UNCITED] / claims if claims else 0.0

    def render(self, phase: str, step: int, steps: int, url: str) -> list[str]:
        checks, drift, superseded = self.ratios()
        page_at, baseline = alerting.DRIFT_RATIO_PAGE, alerting.DRIFT_RATIO_BASELINE
        ticket_at = alerting.SUPERSEDED_RATIO_TICKET
        page = "  -> CitationDriftRateHigh would PAGE" if drift > page_at else ""
        ticket = (
            "  -> CitationContentRefreshDetected: a ticket, not a page"
            if superseded > ticket_at
            else ""
        )
        claims, uncited = self.uncited_ratio()
        uncited_at = alerting.UNCITED_CLAIMS_RATIO_TICKET
        coverage_ticket = "  -> CitationUncitedClaimsHigh: a ticket" if uncited > uncited_at else ""
        clusters = shift_clusters(self.summary.shifts)
        described = ", ".join(f"{c.center:+d} ({c.share:.0%})" for c in clusters) or "none yet"
        hinted = self.summary.decided_by[BY_POSITION_HINT]
        window = f"last {self._window:.0f} s"
        return [
            f"phase {step} of {steps}: {phase}",
            f"  checked {self.summary.citations:,} citations ({checks:,} in the {window})",
            f"  drift       {drift:7.2%}  page above {page_at:.0%}, baseline {baseline:.1%}{page}",
            f"  superseded  {superseded:7.2%}  ticket above {ticket_at:.0%}{ticket}",
            f"  uncited     {uncited:7.2%}  of {claims:,} claims in the window, ticket above "
            f"{uncited_at:.0%}{coverage_ticket}",
            *([] if self.entailment is None else self.entailment.lines()),
            f"  shift clusters of repaired drift: {described}",
            f"  repeated quotes repaired by their position hint (doc_span): {hinted:,}",
            f"  metrics: {url}",
        ]


def _paced(items: list[LocalRecord], seconds: float) -> Iterator[LocalRecord]:
    started = time.monotonic()
    for index, item in enumerate(items):
        due = started + seconds * index / max(1, len(items))
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield item


def _show(out: IO[str], lines: list[str], interactive: bool) -> None:
    if interactive:
        out.write("\x1b[H\x1b[J")  # redraw in place on a terminal
    out.write("\n".join(lines) + "\n" + ("" if interactive else "\n"))
    out.flush()


def run_demo(
    pipeline: Pipeline,
    out: IO[str],
    *,
    record: Callable[[Sequence[Outcome]], None],
    url: str,
    chunks_topic: str,
    answers_topic: str,
    seconds_per_phase: float = 10.0,
    answers: int = 3000,
    seed: int = 7,
    entailment: DemoEntailment | None = None,
    model_wait_seconds: float = MODEL_WAIT_SECONDS,
) -> SweepSummary:
    """Play the three phases; print the view every second; return the overall summary.

    ``record`` counts the outcomes (the exporter's metrics), a second's worth at a time, and
    ``entailment`` its judgements. A model judge gets ``model_wait_seconds`` at the end for
    the claims still waiting for it, then is closed.
    """
    config = ScenarioConfig(
        seed=seed,
        answers=answers,
        resize_share=0.4,
        refresh_share=0.3,
        retypeset_share=0.0,
        silent_edit_share=0.0,
        delete_share=0.0,
        reworded_share=REWORDED_SHARE,
        context_share=CONTEXT_SHARE,
        boilerplate_share=1.0,  # every document repeats some stock sentences
        hint_share=HINT_SHARE,
    )
    phases = demo_phases(build_scenario(config), chunks_topic, answers_topic)
    view = DemoView(window_seconds=max(0.5, seconds_per_phase / 2), entailment=entailment)

    def record_all(outcomes: list[Outcome]) -> None:
        record(outcomes)
        if entailment is not None:
            entailment.record()

    interactive = out.isatty()
    for step, phase in enumerate(phases, start=1):
        record([pipeline.chunk(chunk) for chunk in phase.chunks])
        last_shown = time.monotonic()
        pending: list[Outcome] = []
        for answer in _paced(phase.answers, seconds_per_phase):
            outcome = pipeline.answer(answer)
            pending.append(outcome)
            view.add(outcome)
            view.summary.add_outcome(outcome, f"answer {answer.offset}")
            if time.monotonic() - last_shown >= 1.0:
                last_shown = time.monotonic()
                record_all(pending)
                pending = []
                _show(out, view.render(phase.title, step, len(phases), url), interactive)
        record_all(pending)
        if step == len(phases) and entailment is not None:
            _finish_model(entailment, model_wait_seconds, out)
        _show(out, view.render(phase.title, step, len(phases), url), interactive)
    view.summary.store_loaded(pipeline.store.chunk_count, pipeline.store.document_count)
    view.summary.took(seconds_per_phase * len(phases))
    return view.summary


def _finish_model(entailment: DemoEntailment, seconds: float, out: IO[str]) -> None:
    """Give the model judge a bounded time for what still waits, then close it."""
    if entailment.model is None:
        return
    waiting = entailment.waiting
    if waiting:
        claims = f"{waiting:,} claim{'' if waiting == 1 else 's'}"
        out.write(f"waiting up to {seconds:g} s for the model judge's {claims}\n")
        out.flush()
    entailment.finish(seconds)
