"""The demo's entailment: which judge decided, and what the model judge was asked.

Every judgeable citation is judged by the lexical judge (microseconds). With a model judge,
what the lexical judge cannot settle is offered to it behind the traffic (a
:class:`~exporter.entailment.thread.JudgeThread`), never waited for. Each citation is counted once
in the metrics, as the service counts it, by the judge that decided: the model when it
answered, else the lexical judge (a claim the model's full queue dropped stays the lexical
judge's ``unknown``; one left waiting when the demo ends is counted by no judge).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from exporter.checks.store import ChunkStore
from exporter.entailment.results import EntailmentResult, Judgement, SyncJudge, settled
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.outcome import Mode, Outcome

if TYPE_CHECKING:  # the HTTP client is imported only when a model judge is configured
    from exporter.entailment.thread import JudgeThread, Taken

__all__ = ["DemoEntailment", "ModelTally"]

_INDENT = " " * 14  # under the view's values


@dataclass
class ModelTally:
    """What the model judge answered, what it cost and took, and what it did not take."""

    name: str  # "qwen2 at http://127.0.0.1:8000/v1"
    results: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    seconds: list[float] = field(default_factory=list)
    last_error: str | None = None
    dropped: Counter[str] = field(default_factory=Counter)
    waiting: int = 0
    unjudged: int | None = None  # left undecided when the demo ended (None: not ended)

    def add(self, taken: Taken) -> None:
        for judgement in taken.judgements:
            self.results[judgement.result.value] += 1
            self.cost_usd += judgement.cost_usd
            self.seconds.append(judgement.seconds)
            if judgement.result is EntailmentResult.ERROR:
                self.last_error = judgement.reason
        self.dropped.update(taken.dropped)

    def describe(self) -> str:
        """One line: ``model (NAME) 5 of 40 asked not entailed, 2 errors (timeout), ...``."""
        asked = sum(self.results.values())
        flagged = self.results[EntailmentResult.NOT_ENTAILED]
        errors = self.results[EntailmentResult.ERROR]
        error_text = f"{errors:,} error{'' if errors == 1 else 's'}"
        if errors and self.last_error:
            error_text += f" ({self.last_error})"
        median = (
            f"{statistics.median(self.seconds) * 1000:,.0f} ms median"
            if self.seconds
            else "no answer yet"
        )
        text = (
            f"model ({self.name}) {flagged:,} of {asked:,} asked not entailed, {error_text}, "
            f"${self.cost_usd:,.4f}, {median}"
        )
        notes = [f"{self.waiting:,} waiting"] if self.unjudged is None else []
        if self.unjudged:
            notes.append(f"{self.unjudged:,} left unjudged")
        notes += [
            f"{count:,} dropped ({reason.replace('_', ' ')})"
            for reason, count in sorted(self.dropped.items())
            if count
        ]
        return text + ("; " + ", ".join(notes) if notes else "")


class DemoEntailment:
    """The lexical judge on every judgeable citation, the model judge on what it leaves."""

    def __init__(
        self,
        lexical: SyncJudge,
        store: ChunkStore,
        metrics: ExporterMetrics | None = None,
        *,
        model: JudgeThread | None = None,
        model_name: str = "",
    ) -> None:
        self._lexical = lexical
        self._store = store
        self._metrics = metrics
        self._thread = model
        self.model = None if model is None else ModelTally(model_name)
        self.judged = 0  # by the lexical judge: every judgeable citation
        self.flagged = 0  # of those, not entailed
        self.unsettled = 0  # of those, left to the model (its unknown)
        self._decided: list[Judgement] = []  # lexical judgements that stand, not yet counted

    def add(self, outcome: Outcome) -> None:
        """Judge an answer's judgeable citations; offer what is not settled to the model."""
        for checked in outcome.checked:
            judge_input = checked.judge_input
            evidence = None if judge_input is None else judge_input.evidence(self._store)
            if judge_input is None or evidence is None:
                continue
            judgement = self._lexical.judge(judge_input.claim, evidence)
            self.judged += 1
            self.flagged += judgement.result is EntailmentResult.NOT_ENTAILED
            if not settled(judgement):
                self.unsettled += 1
                if self._thread is not None and self._thread.offer(judge_input.claim, evidence):
                    continue  # the model decides
            self._decided.append(judgement)

    def record(self) -> None:
        """Count what was decided since the last call, and what the model dropped."""
        lexical, self._decided = self._decided, []
        if lexical and self._metrics is not None:
            self._metrics.judged(Mode.INLINE, lexical, [False] * len(lexical))
        if self._thread is None or self.model is None:
            return
        taken = self._thread.take()
        self.model.add(taken)
        self.model.waiting = self._thread.waiting
        metrics = self._metrics
        if metrics is None:
            return
        if taken.judgements:
            metrics.judged(Mode.INLINE, taken.judgements, [True] * len(taken.judgements))
        for reason, count in taken.dropped.items():
            metrics.dropped(reason, count)
        metrics.state.entailment_queue_depth = self.model.waiting

    @property
    def waiting(self) -> int:
        return 0 if self._thread is None else self._thread.waiting

    def finish(self, seconds: float) -> None:
        """Give the model up to ``seconds`` for what waits, close it, count what it decided."""
        if self._thread is None or self.model is None:
            return
        self.model.unjudged = self._thread.finish(seconds)
        self.record()
        self.model.waiting = 0
        if self._metrics is not None:
            self._metrics.state.entailment_queue_depth = 0

    def lines(self) -> list[str]:
        """The view's lines: the lexical judge's flags, then the model's answers."""
        if self.model is None:
            return [
                f"  entailment  {self.flagged:,} of {self.judged:,} claims not entailed "
                "(lexical judge: a prompt to look)"
            ]
        return [
            f"  entailment  lexical {self.flagged:,} of {self.judged:,} claims not entailed, "
            f"{self.unsettled:,} it could not settle (a prompt to look)",
            _INDENT + self.model.describe(),
        ]

    def summary(self) -> str:
        """The final line: which judge decided what."""
        lexical = f"lexical {self.flagged:,} of {self.judged:,} claims not entailed"
        if self.model is None:
            return f"entailment: {lexical} (a prompt to look, not a verdict)"
        return f"entailment: {lexical}; {self.model.describe()}"
