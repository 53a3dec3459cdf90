"""A whole archive of citations against the live store: verdicts out, a summary kept.

Citations are streamed one line at a time, so memory stays flat in their number; only the chunk
store is held in memory. A bad line never stops the sweep: it becomes an ``invalid`` verdict with
its line number, and every input citation yields exactly one verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import IO

from exporter.checks.engine import Policy, check_citation, invalid_verdict
from exporter.checks.store import ChunkStore
from exporter.outputs.report import SweepSummary
from exporter.outputs.verdicts import verdict_json
from exporter.records.decode import RecordError, decode_chunk, decode_citations, parse_json
from exporter.records.jsonl import open_input, read_lines
from exporter.records.schema import Citation, InvalidCitation

__all__ = ["load_store", "run_sweep"]

# How many input lines between two progress reports.
_PROGRESS_EVERY = 2048


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


def run_sweep(
    store: ChunkStore,
    citations_path: str,
    policy: Policy,
    summary: SweepSummary,
    *,
    out: IO[bytes] | None = None,
    progress: Callable[[int], None] | None = None,
) -> SweepSummary:
    """Check every citation in ``citations_path``; write verdicts to ``out`` when given.

    ``progress`` is called now and then with the number of bytes of the input consumed.
    """
    started = time.perf_counter()
    write = out.write if out is not None else None
    with open_input(citations_path) as source:
        for number, line in read_lines(source.stream):
            items: Iterable[Citation | InvalidCitation]
            try:
                items = decode_citations(parse_json(line))
            except RecordError as exc:
                items = (InvalidCitation(str(exc)),)
            for item in items:
                if type(item) is Citation:
                    verdict = check_citation(item, store, policy)
                    if write is not None:
                        write(verdict_json(verdict, line=number))
                else:
                    assert isinstance(item, InvalidCitation)
                    verdict = invalid_verdict(item)
                    where = f"{citations_path}:{number}"
                    if item.index is not None:
                        where += f" citation #{item.index}"
                    summary.note_error(f"{where}: {item.error}")
                    if write is not None:
                        write(verdict_json(verdict, line=number, index=item.index))
                summary.add(verdict)
            if progress is not None and number % _PROGRESS_EVERY == 0:
                progress(source.position())
        if progress is not None:
            progress(source.position())
    summary.elapsed_seconds += time.perf_counter() - started
    return summary
