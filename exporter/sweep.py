"""A whole archive of citations against the live store: verdicts out, a summary kept.

Citations are streamed in batches of lines, so memory stays flat in their number; only the chunk
store is held in memory. A bad line never stops the sweep: it becomes an ``invalid`` verdict with
its line number, and every input citation yields exactly one verdict, in input order.

With ``jobs > 1`` the batches are checked by forked worker processes that share the store
copy-on-write; at most a few batches per worker are in flight, so memory stays flat there too.
``jobs=1`` runs the very same batch function in-process.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import IO

from exporter.checks.engine import Policy, check_citation, invalid_verdict
from exporter.checks.store import ChunkStore
from exporter.outputs.report import SweepSummary
from exporter.outputs.verdicts import verdict_json
from exporter.records.decode import RecordError, decode_chunk, decode_citations, parse_json
from exporter.records.jsonl import open_input, read_lines
from exporter.records.schema import Citation, InvalidCitation

__all__ = ["load_store", "run_sweep"]

# Lines per batch: large enough to amortise inter-process transfer, small enough for progress.
_BATCH_LINES = 2048
# Batches in flight per worker process.
_IN_FLIGHT_PER_JOB = 4


def load_store(path: str, summary: SweepSummary, store: ChunkStore | None = None) -> ChunkStore:
    """Read chunk records into a store; bad records are counted and reported, not fatal."""
    store = store if store is not None else ChunkStore()
    with open_input(path) as source:
        for number, line in read_lines(source.stream):
            try:
                record = decode_chunk(parse_json(line))
            except RecordError as exc:
                summary.invalid_chunk_records += 1
                summary.note_error(f"{path}:{number}: {exc}")
                continue
            store.apply(record)
    summary.chunks_loaded = store.chunk_count
    summary.documents_loaded = store.document_count
    return store


@dataclass(frozen=True, slots=True)
class _Job:
    """What every batch needs besides its lines (inherited by forked workers, not pickled)."""

    store: ChunkStore
    policy: Policy
    path: str
    write_verdicts: bool


_job: _Job | None = None


def _set_job(job: _Job) -> None:
    global _job  # noqa: PLW0603 - the per-process job of a worker, set once at start
    _job = job


def _check_batch(lines: list[tuple[int, bytes]]) -> tuple[bytes, SweepSummary]:
    """Check the citations of some input lines: their verdicts as JSONL, and a partial summary."""
    job = _job
    assert job is not None
    store, policy, path = job.store, job.policy, job.path
    summary = SweepSummary()
    verdicts: list[bytes] = []
    for number, line in lines:
        items: Iterable[Citation | InvalidCitation]
        try:
            items = decode_citations(parse_json(line))
        except RecordError as exc:
            items = (InvalidCitation(str(exc)),)
        for item in items:
            if type(item) is Citation:
                verdict = check_citation(item, store, policy)
                if job.write_verdicts:
                    verdicts.append(verdict_json(verdict, line=number))
            else:
                assert isinstance(item, InvalidCitation)
                verdict = invalid_verdict(item)
                where = f"{path}:{number}"
                if item.index is not None:
                    where += f" citation #{item.index}"
                summary.note_error(f"{where}: {item.error}")
                if job.write_verdicts:
                    verdicts.append(verdict_json(verdict, line=number, index=item.index))
            summary.add(verdict)
    return b"".join(verdicts), summary


def _batches(stream: IO[bytes]) -> Iterator[list[tuple[int, bytes]]]:
    batch: list[tuple[int, bytes]] = []
    for item in read_lines(stream):
        batch.append(item)
        if len(batch) == _BATCH_LINES:
            yield batch
            batch = []
    if batch:
        yield batch


def _in_workers(
    job: _Job, batches: Iterator[list[tuple[int, bytes]]], jobs: int
) -> Iterator[tuple[bytes, SweepSummary]]:
    """Results of the batches, in input order, from ``jobs`` forked worker processes.

    A worker that dies (killed, out of memory) raises BrokenProcessPool here instead of
    leaving the sweep waiting forever.
    """
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_set_job, initargs=(job,)
    ) as pool:
        pending: deque[Future[tuple[bytes, SweepSummary]]] = deque()
        for batch in batches:
            pending.append(pool.submit(_check_batch, batch))
            if len(pending) >= jobs * _IN_FLIGHT_PER_JOB:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _in_process(
    job: _Job, batches: Iterator[list[tuple[int, bytes]]]
) -> Iterator[tuple[bytes, SweepSummary]]:
    _set_job(job)
    for batch in batches:
        yield _check_batch(batch)


def run_sweep(
    store: ChunkStore,
    citations_path: str,
    policy: Policy,
    summary: SweepSummary,
    *,
    out: IO[bytes] | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> SweepSummary:
    """Check every citation in ``citations_path``; write verdicts to ``out`` when given.

    ``progress`` is called after every batch with the number of bytes of the input consumed.
    """
    started = time.perf_counter()
    job = _Job(store, policy, citations_path, out is not None)
    with open_input(citations_path) as source:
        batches = _batches(source.stream)
        results = _in_workers(job, batches, jobs) if jobs > 1 else _in_process(job, batches)
        for verdicts, partial in results:
            if out is not None:
                out.write(verdicts)
            summary.merge(partial)
            if progress is not None:
                progress(source.position())
    summary.elapsed_seconds += time.perf_counter() - started
    return summary
