"""Drawing a sweep's sample for the entailment judge while the sweep checks: every judgeable
citation counted in its stratum, kept as a candidate only while it may still be chosen.

Part of the pure core: every engine's per-record step draws through a :class:`Drawing`; the
candidates travel between processes as tuples of plain values (:data:`PackedCandidate`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from operator import attrgetter
from typing import Any

from exporter.checks.verdict import Repair, Status, Verdict
from exporter.entailment.sampling import (
    KEY_SPACE,
    STRATA,
    KeyFilter,
    StratifiedSample,
    Stratum,
    age_band,
    near_miss_family,
    sample_key,
)
from exporter.pipeline.outcome import CheckedCitation, JudgeInput

__all__ = ["Candidate", "Drawing", "PackedCandidate", "chosen_candidates", "pack_candidate"]


# A candidate as a tuple of plain values: what worker processes send and the sample keeps.
PackedCandidate = tuple[int, int | None, tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...]]

# what a judge's sample needs of a verdict: not what applying it would check (``cited``)
_VERDICT_FIELDS = tuple(
    field.name for field in fields(Verdict) if field.name not in ("repair", "cited")
)
_verdict_values = attrgetter(*_VERDICT_FIELDS)
_repair_values = attrgetter(*(field.name for field in fields(Repair)))
_judge_input_values = attrgetter(*(field.name for field in fields(JudgeInput)))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A judgeable citation of the archive: where it was (a file's line, or a Kafka
    partition's offset), its verdict, what to judge."""

    line: int
    verdict: Verdict
    judge_input: JudgeInput
    partition: int | None = None

    def pack(self) -> PackedCandidate:
        return pack_candidate(self.line, self.verdict, self.judge_input, self.partition)

    @classmethod
    def unpack(cls, packed: PackedCandidate) -> Candidate:
        line, partition, verdict, repair, judge_input = packed
        rebuilt = Verdict(
            **dict(zip(_VERDICT_FIELDS, verdict, strict=True)),
            repair=None if repair is None else Repair(*repair),
        )
        return cls(line, rebuilt, JudgeInput(*judge_input), partition)


def pack_candidate(
    line: int, verdict: Verdict, judge_input: JudgeInput, partition: int | None = None
) -> PackedCandidate:
    """A candidate as nested tuples of plain values: a sweep offers tens of thousands of
    candidates to its sample, and these cost a tenth of the objects to send between processes
    (no class is pickled by reference) and nothing to the garbage collector while the sample
    holds them. :meth:`Candidate.unpack` makes the candidate again."""
    repair = verdict.repair
    return (
        line,
        partition,
        _verdict_values(verdict),
        None if repair is None else _repair_values(repair),
        _judge_input_values(judge_input),
    )


class Drawing:
    """Where a sweep's sample is drawn from: every judgeable citation is counted in its
    stratum, and kept as a candidate only while its key may still be among the sample's
    (below its stratum's threshold, and among the smallest this drawing has seen).

    One per worker process of a file sweep (their candidates merge exactly in the sample),
    one per sweep of the answer topic.
    """

    def __init__(self, now: datetime, seed: int, capacity: int) -> None:
        self.now = now
        self.seed = seed
        self._kept = KeyFilter(capacity)

    def add(  # noqa: PLR0917 - the per-citation loop of every sweep: no objects made
        self,
        checked: Sequence[CheckedCitation],
        line: int,
        thresholds: dict[Stratum, int],
        counts: dict[Stratum, int],
        candidates: list[tuple[Stratum, int, str, PackedCandidate]],
        partition: int | None = None,
    ) -> None:
        """Count the judgeable citations of one line (or Kafka message) in ``counts`` and
        append those worth offering to ``candidates``. A partition's messages draw their keys
        from a seed of their own, as their offsets repeat across partitions."""
        seed = self.seed if partition is None else hash((self.seed, partition))
        band: tuple[str | None, str] | None = None  # the answer's age, read once per line
        for index, item in enumerate(checked):
            judge_input = item.judge_input
            if judge_input is None:
                continue
            verdict = item.verdict
            emitted_at = judge_input.emitted_at
            if band is None or band[0] != emitted_at:
                band = (emitted_at, age_band(emitted_at, self.now))
            family = near_miss_family(
                verdict.status is Status.DRIFT_REPAIRED,
                judge_input.claim,
                judge_input.quote_chars,
                verdict.similarity,
            )
            stratum = STRATA[band[1], family]
            counts[stratum] = counts.get(stratum, 0) + 1
            key = sample_key(seed, line, index)
            # a stratum whose sample is not full yet has no threshold: it takes any key
            if key < thresholds.get(stratum, KEY_SPACE) and self._kept.admit(stratum, key):
                candidate = pack_candidate(line, verdict, judge_input, partition)
                candidates.append((stratum, key, verdict.doc_id or "", candidate))


def chosen_candidates(
    sample: StratifiedSample[PackedCandidate],
) -> Iterator[tuple[Stratum, Candidate]]:
    """The sample a sweep drew, stratum by stratum, as candidates again."""
    for stratum, packed in sample.chosen():
        yield stratum, Candidate.unpack(packed)
