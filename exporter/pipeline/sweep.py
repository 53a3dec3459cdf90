"""One sweep, whatever feeds it: the per-record step of every sweep engine.

A sweep re-checks an archive of answers against the live store. The file sweep (its lines, in
worker processes), the sweeps over the answer topic (an instance's, a consumer group's) and
the replay all hand their records, a batch at a time, to a :class:`SweepStep`: it checks each
record in sweep mode, says which verdicts a sweep publishes, adds the outcome to the batch's
summary and offers its judgeable citations to the judge's sample. Only this module's step and
the summary's own methods write a summary, so every engine counts alike.

Pure: no I/O. A batch is merged into the sweep's summary (and its candidates into the sample)
by the engine once the batch is done: a file sweep when its worker returns it, a topic sweep
once the verdicts it published are delivered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status
from exporter.entailment.drawing import Drawing, PackedCandidate
from exporter.entailment.sampling import Stratum
from exporter.pipeline.messages import check_message, unread
from exporter.pipeline.outcome import Mode, Origin, Outcome
from exporter.pipeline.summary import SweepSummary
from exporter.records.limits import Oversized

__all__ = ["SweepBatch", "SweepStep", "publish_verdicts"]


@dataclass(slots=True)
class SweepBatch:
    """What one batch of a sweep came to: its part of the summary, and of the sample."""

    # the sample's per-stratum thresholds when the batch began (candidates above are not kept)
    thresholds: dict[Stratum, int] = field(default_factory=dict)
    summary: SweepSummary = field(default_factory=SweepSummary)
    # judgeable citations per stratum, and those worth offering to the sample
    counts: dict[Stratum, int] = field(default_factory=dict)
    candidates: list[tuple[Stratum, int, str, PackedCandidate]] = field(default_factory=list)


def publish_verdicts(outcome: Outcome, everything: bool = False) -> None:
    """Add to what an outcome publishes its citations' verdicts: the failing ones, or with
    ``everything`` the passing ones too; never its invalid inputs, which are dead-lettered. Then
    the plug-in checks' results that their own rule publishes (a sweep's: in sweep mode, so no
    coverage verdict, which depends on the answer alone and was published when it arrived).
    """
    publish = outcome.publish
    for checked in outcome.checked:
        status = checked.verdict.status
        if status is not Status.INVALID and (everything or status is not Status.OK):
            publish.append(checked.verdict)
    sweep = outcome.mode is Mode.SWEEP
    for result in outcome.results:
        if result.published(everything=everything, sweep=sweep):
            publish.append(result)


class SweepStep:
    """Checks one record of an archive, counts it in its batch, and draws from it.

    ``drawing`` is this process's part of drawing the judge's sample (None: no sample is
    drawn); the policy must then keep judge inputs (``judge_rate`` 1). ``publish``: say which
    verdicts a sweep publishes (a sweep of the answer topic does; a file sweep writes every
    verdict and publishes none).
    """

    __slots__ = ("drawing", "policy", "publish", "store")

    def __init__(
        self,
        store: ChunkStore,
        policy: Policy,
        drawing: Drawing | None = None,
        *,
        publish: bool = True,
    ) -> None:
        self.store = store
        self.policy = policy
        self.drawing = drawing
        self.publish = publish

    def check(
        self, value: bytes | Oversized | None, origin: Origin, key: bytes | None = None
    ) -> Outcome:
        """The outcome of one record in sweep mode, with what a sweep publishes of it; counted
        nowhere (:meth:`record` counts it in a batch)."""
        if isinstance(value, Oversized):
            error = value.describe(self.policy.limits.max_message_bytes)
            return unread(origin, error, Mode.SWEEP)
        outcome = check_message(
            value, key, origin, store=self.store, policy=self.policy, mode=Mode.SWEEP
        )
        if self.publish:
            publish_verdicts(outcome)
        return outcome

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
        """The outcome of one record (a line never read, as ``Oversized``, is an invalid one),
        added to ``batch``; ``where`` names the record in the summary's errors, ``partition``
        draws a Kafka partition's keys from a seed of its own."""
        outcome = self.check(value, origin, key)
        batch.summary.add_outcome(outcome, where)
        if self.drawing is not None:
            self.drawing.add(
                outcome.checked,
                origin.offset,
                batch.thresholds,
                batch.counts,
                batch.candidates,
                partition=partition,
            )
        return outcome
