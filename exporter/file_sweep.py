"""A whole archive of citations against the live store: verdicts out, a summary kept.

Citations are streamed in batches of lines, bounded in count and in bytes, so memory stays flat
in their number; only the chunk store is held in memory. A bad line never stops the sweep: it
becomes an ``invalid`` verdict with its line number (a line above ``max_message_bytes`` is
skipped unread, a check that raises is reported as ``check_failed``), and every input citation
yields exactly one verdict, in input order.

With ``jobs > 1`` the batches are checked by forked worker processes that share the store
copy-on-write; at most a few batches per worker are in flight, so memory stays flat there too.
``jobs=1`` runs the very same batch function in-process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO

from exporter.checks.coverage import COVERAGE
from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status
from exporter.entailment.drawing import Drawing, PackedCandidate
from exporter.entailment.sampling import StratifiedSample, Stratum
from exporter.files.jsonl import OutputError
from exporter.outputs.verdicts import verdict_json
from exporter.pipeline.changes import Changes
from exporter.pipeline.outcome import Origin
from exporter.pipeline.summary import SweepSummary
from exporter.pipeline.sweep import SweepBatch, SweepStep
from exporter.records.decode import RecordError, decode_chunk, parse_json
from exporter.records.limits import DEFAULT_LIMITS, Limits, Oversized, failure
from exporter.sources import ChunkSource, CitationSource, RawRecord, require_complete

__all__ = ["CoverageOutputError", "load_store", "run_sweep"]

# Lines per batch: large enough to amortise inter-process transfer, small enough for progress.
_BATCH_LINES = 2048
# Bytes per batch: lines may be up to max_message_bytes each; a batch must stay small anyway.
_BATCH_BYTES = 4 << 20
# Batches in flight per worker process.
_IN_FLIGHT_PER_JOB = 4


def load_store(
    source: ChunkSource,
    summary: SweepSummary,
    store: ChunkStore | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> ChunkStore:
    """Read chunk records into a store; bad records are counted and reported, not fatal.

    Raises InputError (naming the source) when it cannot be read to its end.
    """
    store = store if store is not None else ChunkStore()
    with contextlib.closing(source.records(limits.max_message_bytes)) as records:
        for number, line in records:
            try:
                if isinstance(line, Oversized):
                    raise RecordError(line.describe(limits.max_message_bytes))
                store.apply(decode_chunk(parse_json(line), limits))
            except Exception as exc:  # one record never stops the load
                message = str(exc) if isinstance(exc, RecordError) else failure("reading", exc)
                summary.invalid_chunks(1, [f"{source.where(number)}: {message}"])
    require_complete(source)
    summary.store_loaded(store.chunk_count, store.document_count)
    summary.store_read(store.chunkers(), datetime.now(UTC))
    return store


@dataclass(frozen=True, slots=True)
class _Job:
    """What every batch needs besides its lines (inherited by forked workers, not pickled)."""

    store: ChunkStore
    policy: Policy
    source: CitationSource  # named in origins and errors; read by the parent only
    write_verdicts: bool
    write_coverage: bool
    now: datetime | None  # sampling for the entailment judge: the age bands' "now"
    seed: int = 0  # and the sample's seed
    capacity: int = 0  # and the candidates it keeps per stratum
    compare: bool = False  # return each verdict's id and status, for comparing with --previous


_job: _Job | None = None
_step: SweepStep | None = None  # this process's step, with its part of drawing the sample


@dataclass(frozen=True, slots=True)
class _Checked:
    """What one batch came to: JSONL of verdicts and of coverage verdicts, and its part of the
    summary and of the sample."""

    verdicts: bytes
    coverage: bytes
    batch: SweepBatch
    # each citation verdict's id, status and source, when the sweep compares with an earlier one
    ids: list[tuple[str | None, Status, str | None]]


def _set_job(job: _Job) -> None:
    global _job, _step  # noqa: PLW0603 - the per-process job of a worker, set once at start
    _job = job
    drawing = None if job.now is None else Drawing(job.now, job.seed, job.capacity)
    _step = SweepStep(job.store, job.policy, drawing, publish=False)


def _check_batch(
    lines: list[tuple[int, bytes | Oversized]], thresholds: dict[Stratum, int] | None = None
) -> _Checked:
    """Check the citations of some input lines: their verdicts (and the results of plug-in
    checks) and coverage verdicts as JSONL, and the batch's part of the summary and sample.

    Each line goes through the sweep's own step (:class:`~exporter.pipeline.sweep.SweepStep`),
    as a record of the answer topic does in the sweeps over it.
    """
    job, step = _job, _step
    assert job is not None and step is not None
    source = job.source
    batch = SweepBatch(thresholds or {})
    verdicts: list[bytes] = []
    coverage: list[bytes] = []
    ids: list[tuple[str | None, Status, str | None]] = []
    for number, line in lines:
        outcome = step.record(batch, line, Origin(source.name, 0, number), source.where(number))
        if job.compare:
            ids += (
                (c.verdict.citation_id, c.verdict.status, c.verdict.source) for c in outcome.checked
            )
        if job.write_verdicts:
            for checked in outcome.checked:
                verdict = checked.verdict
                index = checked.index if verdict.status is Status.INVALID else None
                verdicts.append(verdict_json(verdict, checked.evidence, line=number, index=index))
        # the checks' results after the line's verdicts; coverage's in a file of their own
        for result in outcome.results:
            if result.check == COVERAGE:
                if job.write_coverage:
                    coverage.append(verdict_json(result, line=number))
            elif job.write_verdicts:
                verdicts.append(verdict_json(result, line=number))
    return _Checked(b"".join(verdicts), b"".join(coverage), batch, ids)


_Batch = list[tuple[int, bytes | Oversized]]


def _batches(records: Iterator[RawRecord]) -> Iterator[_Batch]:
    """Records in batches of at most _BATCH_LINES records and about _BATCH_BYTES bytes."""
    batch: _Batch = []
    size = 0
    for number, line in records:
        batch.append((number, line))
        size += len(line) if isinstance(line, bytes) else 0
        if len(batch) == _BATCH_LINES or size >= _BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _in_workers(
    job: _Job,
    batches: Iterator[_Batch],
    jobs: int,
    thresholds: Callable[[], dict[Stratum, int] | None],
) -> Iterator[_Checked]:
    """Results of the batches, in input order, from ``jobs`` forked worker processes.

    A worker that dies (killed, out of memory) raises BrokenProcessPool here instead of
    leaving the sweep waiting forever.
    """
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_set_job, initargs=(job,)
    ) as pool:
        pending: deque[Future[_Checked]] = deque()
        for batch in batches:
            pending.append(pool.submit(_check_batch, batch, thresholds()))
            if len(pending) >= jobs * _IN_FLIGHT_PER_JOB:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _in_process(
    job: _Job, batches: Iterator[_Batch], thresholds: Callable[[], dict[Stratum, int] | None]
) -> Iterator[_Checked]:
    _set_job(job)
    for batch in batches:
        yield _check_batch(batch, thresholds())


class CoverageOutputError(OutputError):
    """The coverage verdicts could not be written (apart from the verdicts: each has its own
    option to name)."""


def _write(out: IO[bytes], lines: bytes, what: str, error: type[OutputError] = OutputError) -> None:
    try:
        out.write(lines)
    except OSError as exc:
        raise error(f"cannot write the {what}: {exc.strerror or exc}") from None


def run_sweep(
    store: ChunkStore,
    citations: CitationSource,
    policy: Policy,
    summary: SweepSummary,
    *,
    out: IO[bytes] | None = None,
    coverage_out: IO[bytes] | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
    sample: StratifiedSample[PackedCandidate] | None = None,
    now: datetime | None = None,
    changes: Changes | None = None,
) -> SweepSummary:
    """Check every citation of ``citations``; write verdicts to ``out`` and coverage
    verdicts (one per answer event that carried sentences) to ``coverage_out`` when given;
    offer every judgeable citation to ``sample`` (in input order, whatever ``jobs``), its age
    band read at ``now``, when given (the policy must keep judge inputs); compare every
    verdict with an earlier sweep's in ``changes``, when given (here, in input order).

    ``progress`` is called after every batch with how far the source's read has come.
    Raises InputError (naming the source) when the citations cannot be read to their end.
    """
    started = time.perf_counter()
    if sample is not None and now is None:
        now = datetime.now(UTC)
    job = _Job(
        store,
        policy,
        citations,
        out is not None,
        coverage_out is not None,
        now if sample is not None else None,
        sample.seed if sample is not None else 0,
        sample.capacity if sample is not None else 0,
        changes is not None,
    )

    def thresholds() -> dict[Stratum, int] | None:
        return None if sample is None else sample.thresholds()

    # closed when the sweep ends, however: a source holds a file or a connection open
    with contextlib.closing(citations.records(policy.limits.max_message_bytes)) as records:
        batches = _batches(records)
        results = (
            _in_workers(job, batches, jobs, thresholds)
            if jobs > 1
            else _in_process(job, batches, thresholds)
        )
        for checked in results:
            if out is not None:
                _write(out, checked.verdicts, "verdicts")
            if coverage_out is not None:
                _write(coverage_out, checked.coverage, "coverage verdicts", CoverageOutputError)
            summary.merge(checked.batch.summary)
            if changes is not None:
                for citation_id, status, source in checked.ids:
                    changes.add(citation_id, status, source)
            if sample is not None:
                sample.add(checked.batch.counts, checked.batch.candidates)
            consumed = citations.consumed()
            if progress is not None and consumed is not None:
                progress(consumed)
    require_complete(citations)
    summary.took(time.perf_counter() - started)
    return summary
