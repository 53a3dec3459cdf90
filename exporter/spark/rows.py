"""What the Spark sweep runs in its Python workers, one record at a time; no Spark here.

These are the in-process sweep's own steps, cut where Spark shuffles: a chunk line decoded as
:func:`~exporter.file_sweep.load_store` decodes it; an input line decoded into its citations as
:func:`~exporter.pipeline.messages.check_message` decodes it (its invalid citations get their
verdicts here, the others wait for their document); and one document's citations checked with
:func:`~exporter.checks.engine.check_or_report` against a store of that document's chunks. The
check reads nothing of the store but the cited document (and the cited chunk, which must belong
to it), so its verdicts are the in-process sweep's; the Spark tests compare them line by line.

A line comes from Spark's text reader: without its ``\\n``, with the ``\\r`` of a ``\\r\\n``
(JSON ignores it, as the in-process reader's stripping does), blank lines included (skipped
here, as there, after being numbered).
"""

from __future__ import annotations

from typing import Any

from exporter.checks.engine import Policy, check_or_report, invalid_verdict
from exporter.checks.evidence import Evidence, drift_evidence
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.outputs.verdicts import verdict_json
from exporter.pipeline.messages import message_citations, parse_message, unread, unusable
from exporter.pipeline.outcome import CheckedCitation, DeadLetter, Mode, Origin, Outcome
from exporter.records.decode import (
    RecordError,
    decode_chunk,
    parse_json,
)
from exporter.records.limits import Limits, Oversized, failure
from exporter.records.schema import Chunk, ChunkDeletion, Citation, InvalidCitation

__all__ = [
    "CHUNK_FIELDS",
    "CITATION_FIELDS",
    "VERDICT_FIELDS",
    "DocumentChecker",
    "chunk_row",
    "citation_rows",
    "verdict_row",
]

Row = dict[str, Any]

# The columns of each kind of row, with their Spark SQL types (see exporter.spark.columns).
CHUNK_FIELDS: tuple[tuple[str, str], ...] = (
    ("seq", "long"),  # the record's place in the chunk input: the last record per chunk wins
    ("chunk_id", "string"),
    ("doc_id", "string"),  # None for a deletion (and for a record that could not be used)
    ("doc_version", "string"),
    ("text", "string"),
    ("ordinal", "long"),
    ("doc_offset", "long"),
    ("source", "string"),
    ("chunker", "string"),
    ("error", "string"),  # why the record could not be used; None when it could
)
VERDICT_FIELDS: tuple[tuple[str, str], ...] = (
    ("line", "long"),
    ("position", "int"),  # within its answer event; None for a lone record (or a whole line)
    ("index", "int"),  # the verdict's "index": the position of an invalid citation only
    ("citation_id", "string"),
    ("answer_id", "string"),
    ("doc_id", "string"),
    ("status", "string"),
    ("reason", "string"),
    ("action", "string"),
    ("repair_method", "string"),
    ("repair_how", "string"),
    ("shift", "long"),
    ("error", "string"),
    ("verdict", "string"),  # the JSON line the in-process sweep writes, without its newline
)
# A citation waiting for its document's chunks: its line, position and decoded fields.
CITATION_FIELDS: tuple[tuple[str, str], ...] = (
    ("line", "long"),
    ("position", "int"),
    ("citation_id", "string"),
    ("answer_id", "string"),
    ("doc_id", "string"),
    ("doc_version", "string"),
    ("chunk_id", "string"),
    ("start", "long"),
    ("end", "long"),
    ("quote", "string"),
    ("prefix", "string"),
    ("suffix", "string"),
    ("emitted_at", "string"),
    ("topic", "string"),
    ("source", "string"),
    ("sentence_index", "long"),
    ("claim", "string"),
    ("doc_start", "long"),
    ("doc_end", "long"),
    ("doc_sha256", "string"),
)
_CITATION_ATTRIBUTES = tuple(name for name, _ in CITATION_FIELDS[2:])

# Verdicts name no file; the origin of a checked line is only its line number.
_ORIGIN_TOPIC = "citations"


def _blank(raw: bytes) -> bool:
    return not raw or raw.isspace()


def chunk_row(seq: int, raw: bytes, limits: Limits) -> Row | None:
    """One chunk line as a row: a chunk, a deletion, or the error that made it unusable (the
    one load_store reports); None for a blank line."""
    row: Row = {"seq": seq}
    try:
        if len(raw) > limits.max_message_bytes:
            raise RecordError(Oversized(len(raw)).describe(limits.max_message_bytes))
        if _blank(raw):
            return None
        record = decode_chunk(parse_json(raw), limits)
    except Exception as exc:  # one record never stops the load
        row["error"] = str(exc) if isinstance(exc, RecordError) else failure("reading", exc)
        return row
    row["chunk_id"] = record.chunk_id
    if isinstance(record, Chunk):
        row.update(
            doc_id=record.doc_id,
            doc_version=record.doc_version,
            text=record.text,
            ordinal=record.ordinal,
            doc_offset=record.doc_offset,
            source=record.source,
            chunker=record.chunker,
        )
    return row


def chunk_record(row: Row) -> Chunk | ChunkDeletion:
    """The record a chunk event of a document applies to its store (see exporter.spark.engine:
    ``deleted`` when the chunk left the document, deleted or moved to another)."""
    if row["deleted"]:
        return ChunkDeletion(row["chunk_id"])
    return Chunk(
        row["doc_id"],
        row["doc_version"],
        row["chunk_id"],
        row["text"],
        row["ordinal"],
        row["doc_offset"],
        row["source"],
        row["chunker"],
    )


def verdict_row(
    line: int, position: int | None, verdict: Verdict, evidence: Evidence | None = None
) -> Row:
    """A citation's verdict as a row, its JSON line written as the in-process sweep writes it
    (with ``index`` for an invalid citation only)."""
    invalid = verdict.status is Status.INVALID
    index = position if invalid else None
    repair = verdict.repair
    return {
        "line": line,
        "position": position,
        "index": index,
        "citation_id": verdict.citation_id,
        "answer_id": verdict.answer_id,
        "doc_id": verdict.doc_id,
        "status": verdict.status.value,
        "reason": verdict.reason,
        "action": verdict.action.value,
        "repair_method": None if repair is None else repair.method,
        "repair_how": None if repair is None else repair.how,
        "shift": None if repair is None else repair.shift,
        "error": verdict.error,
        "verdict": verdict_json(verdict, evidence, line=line, index=index).decode()[:-1],
    }


def _pending(line: int, position: int | None, citation: Citation) -> Row:
    row: Row = {"line": line, "position": position}
    for name in _CITATION_ATTRIBUTES:
        row[name] = getattr(citation, name)
    return row


def _finished(line: int, outcome: Outcome) -> list[tuple[Row, bool]]:
    return [
        (verdict_row(line, checked.index, checked.verdict), True) for checked in outcome.checked
    ]


def citation_rows(line: int, raw: bytes, limits: Limits) -> list[tuple[Row, bool]]:
    """The citations of one input line, in order, each with whether it is finished: an invalid
    one as its verdict row (finished), a decoded one as a citation row to be checked.

    Decoded by check_message's own first two steps (``parse_message``, ``message_citations``),
    and like it never raises: a decoder that raises makes the whole line ``check_failed``.
    """
    origin = Origin(_ORIGIN_TOPIC, 0, line)
    if len(raw) > limits.max_message_bytes:  # what read_lines and unread make of such a line
        error = Oversized(len(raw)).describe(limits.max_message_bytes)
        return _finished(line, unread(origin, error, Mode.SWEEP))
    if _blank(raw):
        return []
    try:
        return _decoded(line, raw, origin, limits)
    except Exception as exc:  # nothing one line holds may stop the sweep
        letter = DeadLetter.raised(origin, raw, None, exc)
        return _finished(line, unusable(letter, Mode.SWEEP))


def _decoded(line: int, raw: bytes, origin: Origin, limits: Limits) -> list[tuple[Row, bool]]:
    parsed = parse_message(raw, None, origin, limits.max_message_bytes, Mode.SWEEP)
    if isinstance(parsed, Outcome):
        return _finished(line, parsed)
    rows: list[tuple[Row, bool]] = []
    for position, item in message_citations(parsed, limits):
        if type(item) is Citation:
            rows.append((_pending(line, position, item), False))
        else:
            assert isinstance(item, InvalidCitation)
            checked = CheckedCitation(invalid_verdict(item), item.index)
            rows.append((verdict_row(line, checked.index, checked.verdict), True))
    return rows


class DocumentChecker:
    """Checks a stream of rows sorted by document group: each group's chunk records (in input
    order) build a store of that document alone, then its citations are checked against it.

    Only the current group's store is held, so a worker's memory is one document's, however
    many documents its partition holds.
    """

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._group: tuple[str, int] | None = None
        self._store = ChunkStore()

    def _enter(self, group: tuple[str, int]) -> None:
        if group != self._group:
            self._group = group
            self._store = ChunkStore()

    def apply(self, group: tuple[str, int], row: Row) -> None:
        """A chunk record of the group's document (rows of a group come in input order)."""
        self._enter(group)
        self._store.apply(chunk_record(row))

    def check(self, group: tuple[str, int], row: Row) -> Row:
        """The verdict row of a citation row, checked as check_message checks it."""
        self._enter(group)
        citation = Citation(**{name: row[name] for name in _CITATION_ATTRIBUTES})
        position = row["position"]
        outcome = check_or_report(citation, self._store, self._policy, position)
        verdict = invalid_verdict(outcome) if isinstance(outcome, InvalidCitation) else outcome
        evidence = None
        if self._policy.keep_evidence and verdict.is_drift:
            evidence = drift_evidence(citation, verdict, self._store)
        return verdict_row(row["line"], position, verdict, evidence)
