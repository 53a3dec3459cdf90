"""The files of ``apply``: verdict files in, and a JSON Lines archive's repaired copy out.

A sweep's verdict files (its ``--out``, ``.gz`` too) become the changes they ask for
(:func:`read_changes`), with the sweep's id: ``sweep-`` and the first 12 hex digits of the
SHA-256 of their bytes, so the same verdicts are the same sweep, applied or reverted by name.
A JSON Lines archive of citation records or answer events is never changed in place:
:func:`repair_archive` writes a copy, each changed record with its action's fields, every other
field of it, and every other line, as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from exporter.errors import InputError
from exporter.files.jsonl import open_input, open_output, read_lines
from exporter.pipeline.repairs import ApplyPolicy, Change, Held, Tally, decide, plan, written
from exporter.records.decode import RecordError, parse_json
from exporter.records.limits import Oversized

__all__ = ["Changes", "read_changes", "repair_archive"]


@dataclass(slots=True)
class Changes:
    """What verdict files ask for: changes by citation (the last verdict of one wins), the
    tally of those skipped, and the sweep's id."""

    by_citation: dict[str, Change]
    tally: Tally
    sweep: str
    verdicts: int


def read_changes(paths: Iterable[str], policy: ApplyPolicy, max_bytes: int) -> Changes:
    """The changes the verdict files ``paths`` ask for; InputError naming a file that cannot
    be read, or a line that is not JSON."""
    digest = hashlib.sha256()
    by_citation: dict[str, Change] = {}
    tally = Tally()
    verdicts = 0
    for path in paths:
        with open_input(path) as source:
            for number, line in read_lines(source.stream, max_bytes):
                if isinstance(line, Oversized):
                    raise InputError(f"{path} line {number:,}: longer than a verdict can be")
                digest.update(line + b"\n")
                try:
                    record = parse_json(line)
                except RecordError as exc:
                    raise InputError(f"{path} line {number:,}: {exc} (a verdict file?)") from None
                verdicts += 1
                made = plan(record, policy)
                if isinstance(made, Change):
                    if made.citation_id in by_citation:
                        tally.skip("superseded_by_a_later_verdict")
                    by_citation[made.citation_id] = made
                else:
                    tally.skip(made.reason)
    return Changes(by_citation, tally, f"sweep-{digest.hexdigest()[:12]}", verdicts)


def repair_archive(archive: str, out: str, changes: Changes, now: str, max_bytes: int) -> Tally:
    """Write ``archive`` to ``out`` with ``changes`` made where each citation still holds what
    its sweep saw (already made: left; changed since: a conflict, left)."""
    tally = changes.tally
    pending = dict(changes.by_citation)
    seen: set[str] = set()
    with open_input(archive) as source, open_output(out, [archive]) as sink:
        for _, line in read_lines(source.stream, max_bytes):
            if isinstance(line, Oversized):
                raise InputError(f"{archive}: a line of {line.size:,} bytes is too long to copy")
            sink.write(_repaired(line, changes, pending, seen, now, tally) + b"\n")
    for citation_id in pending:
        tally.missing(citation_id)
    return tally


def _repaired(  # noqa: PLR0917 - one line's part of the copy
    line: bytes,
    changes: Changes,
    pending: dict[str, Change],
    seen: set[str],
    now: str,
    tally: Tally,
) -> bytes:
    """The line, with the changes its citations ask for made (the line itself when none).
    Read by the standard library's parser, which keeps every integer exact; a citation id
    found again in a later record is a conflict there (which copy the sweep saw is unknown)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(record, dict):
        return line
    citations = record.get("citations")
    items: list[Any] = citations if isinstance(citations, list) else [record]
    changed = False
    for citation in items:
        if not isinstance(citation, dict):
            continue
        citation_id = citation.get("citation_id")
        if not isinstance(citation_id, str):
            continue
        if citation_id in seen:
            repeated = changes.by_citation.get(citation_id)
            if repeated is not None:
                tally.decided(repeated, "conflict")
            continue
        seen.add(citation_id)
        change = pending.pop(citation_id, None)
        if change is None:
            continue
        held = Held(
            citation.get("chunk_id"),
            citation.get("chunk_span"),
            citation.get("doc_version"),
            citation.get("quote"),
            {name: citation.get(name) for name in change.after},
        )
        decision = decide(change, held)
        tally.decided(change, decision)
        if decision == "apply":
            citation.update(written(change, changes.sweep, now))
            changed = True
    if not changed:
        return line
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )
