"""A seam for tests: watch each record a sweep of the answer topic checks.

Every sweep checks its records through the pipeline's sweep step
(:meth:`exporter.pipeline.core.Pipeline.sweep_step`); a test pipeline wraps that step to see a
record before it is checked, or its outcome after.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.entailment.drawing import Drawing
from exporter.pipeline.outcome import Origin, Outcome
from exporter.pipeline.sweep import SweepBatch, SweepStep
from exporter.records.limits import Oversized

__all__ = ["WatchedStep"]


class WatchedStep(SweepStep):
    """The real step; ``before`` sees each record's origin, ``after`` its outcome."""

    __slots__ = ("after", "before")

    def __init__(
        self,
        step: SweepStep,
        before: Callable[[Origin], None] | None = None,
        after: Callable[[Origin, Outcome], None] | None = None,
    ) -> None:
        super().__init__(step.store, step.policy, step.drawing, publish=step.publish)
        self.before = before
        self.after = after

    def record(
        self,
        batch: SweepBatch,
        value: bytes | Oversized | None,
        origin: Origin,
        where: str,
        *,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> Outcome:
        if self.before is not None:
            self.before(origin)
        outcome = super().record(batch, value, origin, where, key=key, partition=partition)
        if self.after is not None:
            self.after(origin, outcome)
        return outcome


def watching(
    make: Callable[[Drawing | None], SweepStep],
    before: Callable[[Origin], None] | None = None,
    after: Callable[[Origin, Outcome], None] | None = None,
) -> Callable[[Drawing | None], SweepStep]:
    """A ``sweep_step`` that makes watched steps."""

    def sweep_step(drawing: Drawing | None = None) -> SweepStep:
        return WatchedStep(make(drawing), before, after)

    return sweep_step
