"""Fuzz target: no input can crash, stall or blow up the exporter, and none goes unaccounted.

The promise under test (issue 8): every input, however hostile, gets bounded time and memory,
one short error naming where it came from, and every citation exactly one verdict (or a place
in a dead letter). Each property feeds generated inputs through an entry point the product
uses: the offline sweep (``load_store`` + ``run_sweep`` on real files, plain or gzipped, maybe
damaged), the ``sweep`` command itself, the streaming :class:`Pipeline` with real metrics,
``check_message``, and the :class:`ChunkStore` with its document views.

Inputs come in three flavours: arbitrary bytes, arbitrary JSON text (deep nesting, big numbers,
``NaN``, lone surrogate escapes, hostile unicode), and *near-valid* records: a citation, answer
event or chunk record that would pass, with some fields mutated to hostile values.

The number of examples follows the loaded Hypothesis profile (``ci`` unless
``HYPOTHESIS_PROFILE`` says otherwise). ``scripts/fuzz`` sets ``CITATION_FUZZ=1``, which loads
the ``fuzz`` profile registered here, and runs these properties over and over for as long as it
is told to; ``CITATION_FUZZ_STATS=FILE`` makes the module append how many examples it ran.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import hashlib
import io
import json
import math
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from exporter.checks.coverage import CoverageStatus
from exporter.checks.engine import Policy, check_citation
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.cli import main
from exporter.file_sweep import load_store, run_sweep
from exporter.files.jsonl import InputError
from exporter.outputs.metrics import MAX_LABEL_LENGTH, ExporterMetrics, SourceLabels
from exporter.outputs.verdicts import verdict_json
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.messages import check_message
from exporter.pipeline.outcome import DeadLetter, Mode, Origin, Outcome
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import RecordError, decode_chunk, decode_citations
from exporter.records.limits import DEFAULT_LIMITS, MAX_ID_CHARS, Limits
from exporter.records.schema import Chunk, ChunkDeletion, Citation
from exporter.sources.jsonl import JsonLines

settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("CITATION_FUZZ_EXAMPLES", "2000")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
if os.environ.get("CITATION_FUZZ") == "1":
    settings.load_profile("fuzz")

# Generated inputs are large on purpose; the profile decides how many, these only let them be.
FUZZ_SETTINGS = settings(
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ]
)

# "One short error": an error, a dead letter's error and an invalid verdict line stay under this
# many bytes (UTF-8, as they travel in a DLQ header or a JSONL line).
SHORT = 1024
# An invalid verdict echoes the ids that identify the broken citation (each at most
# MAX_ID_CHARS characters, see exporter/records/limits.py); those come on top of SHORT.
ECHOED_IDS = ("citation_id", "answer_id", "doc_id")
# "Bounded time": CPU seconds one message (at most a few small citations here) may take. A stall
# detector for the long runs of scripts/fuzz (CITATION_FUZZ=1) only: the suite asserts no
# timings (performance figures are bench/hostile_bench.py's job), so in CI it is off.
STALL_SECONDS = 1.0 if os.environ.get("CITATION_FUZZ") == "1" else math.inf
DEAD_LETTER_REASONS = {"invalid_json", "invalid_record", "oversized", "empty"}
STATUSES = {status.value for status in Status}

_examples: Counter[str] = Counter()


def _write_stats() -> None:
    """Append "property examples" lines to $CITATION_FUZZ_STATS (for scripts/fuzz)."""
    path = os.environ.get("CITATION_FUZZ_STATS")
    if path:
        with open(path, "a", encoding="utf-8") as stats:
            stats.writelines(f"{name} {count}\n" for name, count in sorted(_examples.items()))


# at exit, not at teardown: a round that scripts/fuzz interrupts at its deadline counts too
atexit.register(_write_stats)


# -- hostile building blocks ----------------------------------------------------------------

# Characters that fold, expand, vanish, combine, reorder or fool regular expressions.
NASTY = (
    "\ufdfa",  # NFKC: 18 characters
    "\ufb01",  # ligature fi
    "\u0301",  # combining acute (class 230)
    "\u0316",  # combining grave below (class 220)
    "\u20d2",  # combining long vertical line overlay
    "\u200b",  # zero-width space
    "\u200d",  # zero-width joiner
    "\u00ad",  # soft hyphen
    "\ufeff",  # BOM
    "\u2014",  # em dash
    "\u2011",  # non-breaking hyphen
    "-",
    " ",
    "\n",
    "\t",
    "\r",
    "\u00a0",  # no-break space
    "\u3000",  # ideographic space
    "\u2028",  # line separator
    "\u202e",  # right-to-left override
    "\x00",
    "\x7f",
    "\uffff",
    "\U0001f600",
    "\uff11",  # full-width 1
    "\u0663",  # Arabic-Indic 3
    "\u00df",  # sharp s
    "\u0130",  # I with dot
    "\u2019",  # right single quote
    "\u201c",
    "\u2026",  # ellipsis
    "e",
    "a",
    "0",
    "9",
    ".",
    ",",
)
NASTY_WORDS = ("not", "no", "n't", "never", "30", "60", "3.5", "1,000", "days", "refund", " ")
nasty_char = st.sampled_from(NASTY)
hostile_text = st.one_of(
    st.text(st.one_of(nasty_char, st.characters(codec="utf-8")), max_size=60),
    st.lists(st.sampled_from(NASTY + NASTY_WORDS), max_size=40).map("".join),
    # floods and repetitions: combining marks, expansions, invisible runs, periodic text
    st.builds(
        lambda unit, n: unit * n,
        st.sampled_from(
            [*NASTY, "a-", "a\u0301\u0316", "ab", "the refund ", "\u200b-", "  ", "1."]
        ),
        st.integers(0, 800),
    ),
)

SENTENCES = (
    "The refund window is 30 days from purchase.",
    "Refunds are not available for annual plans.",
    "Support answers within 2 business days, never on weekends.",
    "The \ufb01le limit is 1,000 MB \u2014 per upload.",
    "Enter\u00adprise customers get SSO and audit logs.",
    "Prices do not include VAT; see the pricing page.",
    "The refund window is 30 days from purchase.",  # a copy: ambiguity on purpose
)
prose = st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=6).map(" ".join)
chunk_text = st.one_of(prose, prose, hostile_text, st.tuples(prose, hostile_text).map("".join))

# JSON values orjson can write (64-bit integers); used for field mutations.
INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)
EDGE_INTS = st.sampled_from([0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**64 - 1, -(2**63)])
leaf_value = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    EDGE_INTS,
    st.floats(),
    hostile_text,
    st.sampled_from(["", " ", "NaN", "null", "x" * (MAX_ID_CHARS + 1), "\u00e9" * MAX_ID_CHARS]),
)
json_value = st.recursive(
    leaf_value,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)


# Arbitrary JSON *text*: what orjson cannot produce (big numbers, NaN, surrogate escapes).
def _json_string(text: str, ascii_only: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii_only)


KEYS = (
    "citations",
    "citation_id",
    "answer_id",
    "doc_id",
    "doc_version",
    "chunk_id",
    "chunk_span",
    "quote",
    "prefix",
    "suffix",
    "topic",
    "source",
    "emitted_at",
    "sentence_index",
    "sentences",
    "claim",
    "doc_span",
    "doc_sha256",
    "text",
    "deleted",
    "doc_offset",
    "ordinal",
    "chunker",
)
json_string_text = st.one_of(
    st.builds(_json_string, st.text(st.characters(exclude_categories=())), st.booleans()),
    st.builds(_json_string, hostile_text, st.booleans()),
    st.sampled_from(KEYS).map(json.dumps),
    st.sampled_from(
        ['"\\ud800"', '"\\udfff"', '"\\ud83d\\ude00"', '"a\\ud83d"', '"\\u0000"', '"\\/"']
    ),
)
json_number_text = st.one_of(
    st.integers().map(str),
    st.sampled_from(
        ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "-0", "1e-400", "01", "1.", ".5"]
    ),
    st.sampled_from([str(2**64), str(-(2**63) - 1), "9" * 400, "-" + "9" * 30]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
json_text = st.recursive(
    st.one_of(st.sampled_from(["null", "true", "false"]), json_number_text, json_string_text),
    lambda children: st.one_of(
        st.lists(children, max_size=5).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(json_string_text, children), max_size=5).map(
            lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"
        ),
    ),
    max_leaves=25,
)
# nesting around and beyond orjson's limit (1,024), closed or cut off
deep_json = st.builds(
    lambda depth, kind, closed: kind[0] * depth + (kind[1] * depth if closed else "1"),
    st.integers(1, 3000),
    st.sampled_from([("[", "]"), ('{"citations":[', "]}"), ('{"a":', "}")]),
    st.booleans(),
)


# -- a small live store, and records near it ------------------------------------------------

DELETE = object()


@st.composite
def worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chunk records of 1-3 documents, placed by offset, by ordinal, or not at all."""
    records = []
    for d in range(draw(st.integers(1, 3))):
        placed = draw(st.sampled_from(["offset", "ordinal", "none"]))
        at = 0
        for n in range(draw(st.integers(1, 3))):
            text = draw(chunk_text)
            record: dict[str, Any] = {
                "doc_id": f"d{d}",
                "doc_version": "v1",
                "chunk_id": f"d{d}#{n}",
                "text": text,
                "source": draw(st.sampled_from(["kb", "vendor", "s" * 200, "\u00e9" * 70])),
            }
            if placed == "offset":
                record["doc_offset"] = at
            if placed != "none":
                record["ordinal"] = n
            at = max(0, at + len(text) - draw(st.integers(0, 3)))  # chunkers overlap, or not
            records.append(record)
    return records


def _mutate(draw: st.DrawFn, record: dict[str, Any], hostile: dict[str, Any]) -> dict[str, Any]:
    """``record`` with up to three fields deleted or replaced by hostile values."""
    keys = sorted(set(record) | set(hostile))
    # most records keep their shape (so the checks behind decoding run), some lose it
    for key in draw(st.one_of(st.just([]), st.lists(st.sampled_from(keys), max_size=3))):
        value = draw(st.one_of(st.just(DELETE), json_value, hostile.get(key, json_value)))
        if value is DELETE:
            record.pop(key, None)
        else:
            record[key] = value
    return record


def _quote_variants(text: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(text),
        st.just(text.upper()),
        st.just(text.replace("30", "60")),
        st.tuples(hostile_text, st.just(text), hostile_text).map("".join),
        st.builds(lambda c: text.replace(" ", c), nasty_char),
        st.builds(lambda n: text * n, st.integers(2, 40)),
        hostile_text,
    )


@st.composite
def near_citations(draw: st.DrawFn, world: list[dict[str, Any]]) -> dict[str, Any]:
    """A citation of the world, maybe drifted, with some fields turned hostile."""
    chunk = draw(st.sampled_from(world))
    text = chunk["text"]
    sentences = [s for s in SENTENCES if s in text]
    if sentences and draw(st.booleans()):  # a whole sentence: what answers usually cite
        sentence = draw(st.sampled_from(sentences))
        start = text.index(sentence)
        end = start + len(sentence)
    else:
        start = draw(st.integers(0, max(0, len(text) - 1)))
        end = draw(st.integers(start + 1, max(start + 1, len(text))))
    quote = text[start:end] if text[start:end].strip() else "refund window"
    record: dict[str, Any] = {
        "citation_id": f"c{draw(st.integers(0, 10**6))}",
        "answer_id": "a1",
        "doc_id": chunk["doc_id"],
        "doc_version": chunk["doc_version"],
        "chunk_id": draw(st.sampled_from([chunk["chunk_id"], world[0]["chunk_id"], "gone#1"])),
        "chunk_span": [start, end],
        "quote": draw(_quote_variants(quote)),
    }
    # a span that moved (re-chunking), maybe absurdly far: the quote is still in the document
    moved = draw(st.sampled_from([0, 0, 0, 0, 0, 0, 7, 10**6, 2**63, 2**64 - 1 - end]))
    record["chunk_span"] = [start + moved, end + moved]
    if draw(st.booleans()):
        record["prefix"] = draw(st.one_of(st.just(text[:start]), hostile_text))
        record["suffix"] = draw(st.one_of(st.just(text[end:]), hostile_text))
    if draw(st.booleans()):
        record["topic"] = draw(st.sampled_from(["pricing", "legal", "howto"]))
    if draw(st.booleans()):  # a position hint, true (for the chunk's own offset) or not
        offset = chunk.get("doc_offset", 0) + draw(st.sampled_from([0, 0, 1, 10**6]))
        record["doc_span"] = [offset + start, offset + end]
        record["doc_sha256"] = draw(st.sampled_from(["0" * 64, hashlib.sha256(b"").hexdigest()]))
    span = st.one_of(
        st.tuples(INT64, INT64).map(list),
        st.tuples(EDGE_INTS, EDGE_INTS).map(list),
        st.just([start, end + 10**6]),
        st.just([2**63 + start, 2**63 + end]),
        st.just([2**64 - 1 - (end - start), 2**64 - 1]),
        st.just([end, start]),
        st.lists(INT64, max_size=4),
    )
    hostile = {
        "chunk_span": span,
        "quote": hostile_text,
        "prefix": hostile_text,
        "suffix": hostile_text,
        "doc_version": st.sampled_from(["v2", "v1 ", "V1"]),
        "emitted_at": st.sampled_from(["2024-02-30T00:00:00Z", "2024-01-01T00:00:00Z", "9" * 70]),
        "sentence_index": st.one_of(INT64, EDGE_INTS),
        "answer_id": st.sampled_from(["a2", "a1", "\U0001f600" * 100]),
        "doc_span": span,
        "doc_sha256": st.one_of(hostile_text, st.sampled_from(["A" * 64, "a" * 63, "a" * 65])),
    }
    return _mutate(draw, record, hostile)


@st.composite
def near_answers(draw: st.DrawFn, world: list[dict[str, Any]]) -> dict[str, Any]:
    """An answer event whose citations are near-valid, maybe with a hostile header."""
    citations: list[Any] = draw(st.lists(near_citations(world), max_size=6))
    citations += draw(st.lists(json_value, max_size=2))
    record: dict[str, Any] = {
        "answer_id": "a1",
        "emitted_at": "2024-05-01T12:00:00+00:00",
        "topic": "pricing",
        "sentences": ["A sentence."],
        "citations": draw(st.permutations(citations)),
    }
    hostile = {
        "citations": st.one_of(st.lists(st.just({}), min_size=3, max_size=40), json_value),
        "sentences": st.one_of(
            st.lists(json_value, max_size=3),
            st.lists(st.one_of(hostile_text, st.text(max_size=40)), max_size=8),
        ),
        "answer_id": st.sampled_from(["", "\U0001f600" * 300, "x" * (MAX_ID_CHARS + 1)]),
    }
    return _mutate(draw, record, hostile)


@st.composite
def near_chunks(draw: st.DrawFn, world: list[dict[str, Any]]) -> dict[str, Any]:
    """A chunk record of the world, re-cut, re-versioned or placed absurdly."""
    record = dict(draw(st.sampled_from(world)))
    record["chunk_id"] = draw(st.sampled_from([record["chunk_id"], "d0#9", "d1#0"]))
    hostile = {
        "doc_offset": st.one_of(
            st.sampled_from([0, 1, 4097, 90_000_000, 100_000_000, 100_000_001, -1]), INT64
        ),
        "ordinal": st.one_of(EDGE_INTS, INT64),
        "text": st.one_of(chunk_text, hostile_text),
        "doc_version": st.sampled_from(["v2", "v0", ""]),
        "deleted": st.sampled_from([True, False, 1, "true"]),
        "chunker": st.sampled_from(["cut-v2", "x" * 2000]),
    }
    return _mutate(draw, record, hostile)


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def _encode(text: str) -> bytes:
    """UTF-8, lone surrogates included (as the invalid bytes a broken producer would send)."""
    return text.encode("utf-8", "surrogatepass")


@st.composite
def citation_lines(draw: st.DrawFn, world: list[dict[str, Any]]) -> bytes:
    """One line of a citations file (or one answer message), of any flavour."""
    return draw(
        st.one_of(
            near_citations(world).map(_dumps),
            near_citations(world).map(_dumps),
            near_answers(world).map(_dumps),
            near_answers(world).map(_dumps),
            near_answers(world).map(_dumps),
            json_text.map(_encode),
            deep_json.map(_encode),
            json_value.map(_dumps),
            st.binary(max_size=200),
            st.sampled_from([b"", b" ", b"\r", b"\xff\xfe", b"{", b'{"citations": []}']),
        )
    )


@st.composite
def chunk_lines(draw: st.DrawFn, world: list[dict[str, Any]]) -> bytes:
    """One line of a chunks file (or one chunk message), of any flavour."""
    return draw(
        st.one_of(
            near_chunks(world).map(_dumps),
            near_chunks(world).map(_dumps),
            json_text.map(_encode),
            json_value.map(_dumps),
            st.binary(max_size=100),
        )
    )


some_limits = st.builds(
    Limits,
    max_message_bytes=st.sampled_from([120, 2_000, DEFAULT_LIMITS.max_message_bytes]),
    max_chunk_chars=st.sampled_from([50, DEFAULT_LIMITS.max_chunk_chars]),
    max_citations_per_answer=st.sampled_from([2, DEFAULT_LIMITS.max_citations_per_answer]),
    max_sentences_per_answer=st.sampled_from([3, DEFAULT_LIMITS.max_sentences_per_answer]),
    max_quote_chars=st.sampled_from([30, DEFAULT_LIMITS.max_quote_chars]),
)
# mostly the defaults (what production runs), sometimes tight limits that inputs run into
limits_strategy = st.one_of(st.just(DEFAULT_LIMITS), st.just(DEFAULT_LIMITS), some_limits)
policies = st.builds(
    Policy,
    threshold=st.sampled_from([98.0, 98.0, 100.0, 80.0, 1.0]),
    limits=limits_strategy,
)


# -- the oracle -----------------------------------------------------------------------------


def _parsed(data: bytes) -> tuple[bool, Any]:
    """(parsed, value) as the contract reads a line: one JSON value, trailing blanks allowed."""
    for candidate in (data, data.rstrip()):
        try:
            return True, orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
    return False, None


def expected_citations(data: bytes, limits: Limits) -> int:
    """How many verdicts or dead-lettered citations one (non-blank, in-limit) input yields."""
    if len(data) > limits.max_message_bytes:
        return 1
    ok, value = _parsed(data)
    if not ok or type(value) is not dict or "citations" not in value:
        return 1
    citations = value["citations"]
    if type(citations) is not list or len(citations) > limits.max_citations_per_answer:
        return 1
    return len(citations)


def carries_sentences(data: bytes | None, limits: Limits = DEFAULT_LIMITS) -> bool:
    """Whether an input is an answer event that carried sentences: it gets a coverage verdict."""
    if data is None or len(data) > limits.max_message_bytes:
        return False
    ok, value = _parsed(data)
    return (
        ok and type(value) is dict and "citations" in value and value.get("sentences") is not None
    )


def file_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(1-based number, content without its newline) of every line of a file."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return list(enumerate(lines, start=1))


def is_blank(content: bytes, limits: Limits) -> bool:
    return len(content) <= limits.max_message_bytes and (content + b"\n").isspace()


def _short(text: str | None) -> bool:
    return text is not None and 0 < len(text.encode("utf-8", "surrogatepass")) < SHORT


def _echoed_bytes(record: dict[str, Any]) -> int:
    return sum(len(orjson.dumps(record.get(key))) for key in ECHOED_IDS)


def assert_invalid_verdict_short(record: dict[str, Any], line: bytes) -> None:
    """An invalid verdict: a bounded reason, one short error, and a short line besides its ids."""
    assert record["action"] == "fix_record"
    assert record["reason"] in DEAD_LETTER_REASONS, record
    assert _short(record["error"]), f"error of {len(record['error'].encode())} bytes"
    assert "\n" not in record["error"]
    assert len(line) - _echoed_bytes(record) < SHORT, f"invalid verdict line of {len(line)} bytes"
    for key in ECHOED_IDS:
        assert record[key] is None or len(record[key]) <= MAX_ID_CHARS


def assert_dead_letter_short(letter: DeadLetter) -> None:
    assert letter.reason in DEAD_LETTER_REASONS, (letter.reason, letter.error)
    assert _short(letter.error), f"dead-letter error of {len(letter.error.encode())} bytes"
    assert "\n" not in letter.error
    for item in letter.citations:
        assert _short(item.error)


def assert_labels_short(registry: CollectorRegistry) -> None:
    sources = set()
    for family in registry.collect():
        for sample in family.samples:
            for name, value in sample.labels.items():
                assert len(value) <= MAX_LABEL_LENGTH, (family.name, name, len(value))
                if name == "source":
                    sources.add(value)
    assert len(sources) <= 21  # max_sources (20) plus "other"


# -- the offline sweep ----------------------------------------------------------------------


def _write(
    path: Path, lines: list[bytes], compress: bool, damage: tuple[str, int]
) -> tuple[bool, bytes]:
    """Write lines (gzipped or not, maybe damaged): (damaged, the content a reader should see).

    A compressed file cut to nothing reads as an empty file (gzip has no header to miss), so it
    counts as an empty input rather than a damaged one.
    """
    data = b"".join(line + b"\n" for line in lines)
    if not compress:
        path.write_bytes(data)
        # gzip's magic bytes make any input read as gzip, whatever its name: then it is damaged
        return data.startswith(b"\x1f\x8b"), data
    packed = bytearray(gzip.compress(data, mtime=0))
    kind, at = damage
    if kind == "truncate":
        packed = packed[: at % (len(packed) + 1)]
    elif kind == "flip":
        packed[at % len(packed)] ^= 0x5A
    elif kind == "trailing":
        packed += b"\x1f\x8b garbage"
    path.write_bytes(bytes(packed))
    if not packed:
        return False, b""
    return kind != "none", data


damages = st.tuples(st.sampled_from(["none", "none", "truncate", "flip", "trailing"]), INT64)


def assert_input_error(exc: InputError, path: Path) -> None:
    message = str(exc)
    assert str(path) in message and "\n" not in message
    assert len(message.encode()) < SHORT + len(str(path))


@st.composite
def sweep_inputs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[bytes], list[bytes]]:
    world = draw(worlds())
    chunks = [_dumps(record) for record in world]
    chunks += draw(st.lists(chunk_lines(world), max_size=6))
    chunks = draw(st.permutations(chunks))
    return world, chunks, draw(st.lists(citation_lines(world), min_size=1, max_size=8))


def _check_sweep_verdicts(
    output: bytes, data: bytes, store: ChunkStore, policy: Policy, summary: SweepSummary
) -> None:
    """Every verdict line is JSON with a status; every citation of the input has exactly one."""
    limits = policy.limits
    records = []
    for line in output.split(b"\n")[:-1]:
        record = orjson.loads(line)
        assert record["status"] in STATUSES, record
        if record["status"] == "invalid":
            assert_invalid_verdict_short(record, line)
        else:
            assert "error" not in record
        repair = record["repair"]
        if repair is not None:
            chunk = store.chunk(repair["chunk_id"])
            start, end = repair["chunk_span"]
            assert chunk is not None and chunk.doc_id == record["doc_id"]
            assert 0 <= start < end <= len(chunk.text)
        records.append(record)
    numbers = [record["line"] for record in records]
    assert numbers == sorted(numbers), "verdicts out of input order"
    expected = {
        number: expected_citations(content, limits)
        for number, content in file_lines(data)
        if not is_blank(content, limits)
    }
    assert Counter(numbers) == +Counter(expected), "a citation without exactly one verdict"
    assert summary.citations == len(records)
    for error in summary.errors:
        assert "\n" not in error and len(error.encode()) < 2 * SHORT


@FUZZ_SETTINGS
@given(
    inputs=sweep_inputs(),
    policy=policies,
    compress=st.booleans(),
    damage=damages,
    damage_chunks=st.booleans(),
)
def test_the_sweep_gives_every_citation_exactly_one_verdict(
    inputs: tuple[list[dict[str, Any]], list[bytes], list[bytes]],
    policy: Policy,
    compress: bool,
    damage: tuple[str, int],
    damage_chunks: bool,
) -> None:
    """Any chunks and citations files, plain or gzipped (maybe damaged), through ``load_store``
    and ``run_sweep``: nothing escapes but a one-line InputError naming the damaged file; else
    every line yields one invalid verdict or one verdict per element of its ``citations``, in
    input order, each a JSON line with a status, invalid ones short, repairs inside their chunk.
    """
    _examples["sweep"] += 1
    _, chunk_lines_, citation_lines_ = inputs
    undamaged = ("none", 0)
    with tempfile.TemporaryDirectory() as folder:
        suffix = ".jsonl.gz" if compress else ".jsonl"
        chunks_path = Path(folder) / f"chunks{suffix}"
        citations_path = Path(folder) / f"citations{suffix}"
        chunks_damaged, _ = _write(
            chunks_path, chunk_lines_, compress, damage if damage_chunks else undamaged
        )
        citations_damaged, data = _write(
            citations_path, citation_lines_, compress, undamaged if damage_chunks else damage
        )
        summary = SweepSummary()
        try:
            store = load_store(JsonLines(str(chunks_path)), summary, limits=policy.limits)
        except InputError as exc:
            assert chunks_damaged, exc
            assert_input_error(exc, chunks_path)
            return
        assert summary.invalid_chunk_records <= len(chunk_lines_) + sum(
            line.count(b"\n") for line in chunk_lines_
        )
        out = io.BytesIO()
        started = time.thread_time()
        try:
            run_sweep(store, JsonLines(str(citations_path)), policy, summary, out=out, jobs=1)
        except InputError as exc:
            assert citations_damaged, exc
            assert_input_error(exc, citations_path)
            return
        citations = sum(max(1, line.count(b'"citations"')) for line in citation_lines_)
        assert time.thread_time() - started < STALL_SECONDS * citations
    _check_sweep_verdicts(out.getvalue(), data, store, policy, summary)


@FUZZ_SETTINGS
@given(
    inputs=sweep_inputs(),
    compress=st.booleans(),
    damage=damages,
    summary_format=st.sampled_from(["text", "json"]),
    max_message_bytes=st.sampled_from(["120", "2000", "1048576"]),
)
def test_the_sweep_command_exits_0_1_or_2_never_with_a_traceback(
    inputs: tuple[list[dict[str, Any]], list[bytes], list[bytes]],
    compress: bool,
    damage: tuple[str, int],
    summary_format: str,
    max_message_bytes: str,
) -> None:
    """``citation-exporter sweep`` on any files: 0 or 1 with a summary and a verdict file for a
    completed sweep, 2 with exactly one line on stderr for a damaged input, never 3 (a bug)."""
    _examples["cli"] += 1
    _, chunk_lines_, citation_lines_ = inputs
    with tempfile.TemporaryDirectory() as folder:
        suffix = ".jsonl.gz" if compress else ".jsonl"
        chunks_path = Path(folder) / f"chunks{suffix}"
        citations_path = Path(folder) / f"citations{suffix}"
        out_path = Path(folder) / f"verdicts{suffix}"
        chunks_damaged, _ = _write(chunks_path, chunk_lines_, compress, ("none", 0))
        damaged, _ = _write(citations_path, citation_lines_, compress, damage)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = main(
                    [
                        "sweep",
                        "--chunks",
                        str(chunks_path),
                        "--citations",
                        str(citations_path),
                        "--out",
                        str(out_path),
                        "--jobs",
                        "1",
                        "--no-progress",
                        "--format",
                        summary_format,
                        "--max-message-bytes",
                        max_message_bytes,
                        "--allow-empty",  # exit 2 for want of valid citations is tested apart
                    ]
                )
            except SystemExit as exc:
                status = exc.code
        assert status in (0, 1, 2), (status, stderr.getvalue())
        assert "Traceback" not in stderr.getvalue()
        if status == 2:
            assert damaged or chunks_damaged
            [line] = stderr.getvalue().splitlines()
            named = citations_path if damaged else chunks_path
            assert str(named) in line and len(line.encode()) < SHORT + len(folder)
            assert not out_path.exists(), "a failed sweep left a verdict file"
        else:
            assert stderr.getvalue() == ""
            assert out_path.exists() and stdout.getvalue()
            if summary_format == "json":
                summary = orjson.loads(stdout.getvalue())
                assert summary["passed"] is (status == 0)


def _assert_publishable(verdict: Verdict, origin: Origin, mode: str) -> None:
    """The verdict serialises as the service publishes it: one JSON line with a status."""
    line = verdict_json(
        verdict, mode=mode, topic=origin.topic, partition=origin.partition, offset=origin.offset
    )
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line)["status"] == verdict.status.value


# -- the streaming service ------------------------------------------------------------------

keys = st.one_of(st.none(), st.binary(max_size=20), st.sampled_from([b"d0#0", b"\xff\xfe"]))


@st.composite
def message_streams(draw: st.DrawFn) -> tuple[list[tuple[str, Any, Any]], Limits]:
    """Chunk messages (the world first), then chunk and answer messages interleaved."""
    world = draw(worlds())
    limits = draw(limits_strategy)
    chunk_message = st.tuples(st.just("chunk"), keys, st.one_of(st.none(), chunk_lines(world)))
    answer_value = st.one_of(
        citation_lines(world),
        citation_lines(world),
        citation_lines(world),
        st.none(),
        st.just(b"[" * (limits.max_message_bytes + 1)),
    )
    answer_message = st.tuples(st.just("answer"), keys, answer_value)
    events = draw(st.lists(st.one_of(chunk_message, answer_message, answer_message), max_size=10))
    return [("chunk", None, _dumps(record)) for record in world] + events, limits


@FUZZ_SETTINGS
@given(
    stream=message_streams(),
    threshold=st.sampled_from([98.0, 100.0, 50.0]),
    publish_all=st.booleans(),
    mode=st.sampled_from(list(Mode)),
)
def test_the_pipeline_accounts_for_every_citation_of_every_message(
    stream: tuple[list[tuple[str, Any, Any]], Limits],
    threshold: float,
    publish_all: bool,
    mode: Mode,
) -> None:
    """Any chunk and answer messages through ``Pipeline.chunk`` / ``Pipeline.answer`` with real
    metrics: nothing raises; every answer message's verdicts and dead letters account for each
    of its citations exactly once; dead-letter errors are short with a bounded reason (never
    ``check_failed``, a swallowed bug); no message takes a second of CPU; labels stay short."""
    _examples["pipeline"] += 1
    events, limits = stream
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "fuzz")
    policy = Policy(threshold=threshold, limits=limits)
    pipeline = Pipeline(ChunkStore(), policy, publish_all=publish_all)
    outcomes = []
    for offset, (kind, key, value) in enumerate(events):
        if kind == "chunk":
            outcome = pipeline.chunk(LocalRecord("rag.chunks", 0, offset, key, value))
            assert not outcome.checked
            if outcome.dead_letter is not None:
                assert_dead_letter_short(outcome.dead_letter)
            outcomes.append(outcome)
            continue
        started = time.thread_time()
        outcome = pipeline.answer(LocalRecord("rag.answers", 3, offset, key, value), mode)
        assert time.thread_time() - started < STALL_SECONDS, "one message stalled the checks"
        outcomes.append(outcome)
        assert outcome.origin == Origin("rag.answers", 3, offset)
        assert_accounted_for(outcome, value, key, limits)
        for verdict in outcome.verdicts:
            event(f"verdict {verdict.status.value} {verdict.reason}")
            _assert_publishable(verdict, outcome.origin, mode)
        if outcome.dead_letter is not None:
            event(f"dead letter {outcome.dead_letter.reason}")
        publishable = [*outcome.verdicts, outcome.coverage]
        assert all(any(p is v for v in publishable) for p in outcome.publish)
        coverage = outcome.coverage
        # published inline: uncited claims, and claims no readable citation can vouch for
        uncited = coverage is not None and coverage.status in (
            CoverageStatus.UNCITED_CLAIMS,
            CoverageStatus.UNJUDGED,
        )
        published = any(p is coverage for p in outcome.publish)
        if mode is Mode.INLINE:
            assert published == uncited or (published and publish_all)
        else:  # coverage depends on the answer alone: a sweep does not publish it again
            assert not published
        failing = [v for v in outcome.verdicts if v.status is not Status.OK]
        assert all(any(p is v for p in outcome.publish) for v in failing)
    metrics.record(outcomes)
    assert_labels_short(registry)


def assert_accounted_for(
    outcome: Outcome, value: bytes | None, key: bytes | None, limits: Limits
) -> None:
    """Every citation of the message has one entry in ``checked``, in order; the invalid ones,
    and only they, are listed in its one dead letter, which is short and keeps the origin."""
    expected = 1 if value is None else expected_citations(value, limits)
    assert len(outcome.checked) == expected, (len(outcome.checked), expected, outcome.dead_letter)
    invalid = [c for c in outcome.checked if c.verdict.status is Status.INVALID]
    letter = outcome.dead_letter
    coverage = outcome.coverage
    assert (coverage is not None) == carries_sentences(value, limits)
    bad_sentences = coverage is not None and coverage.status is CoverageStatus.INVALID
    assert (letter is None) == (not invalid and not bad_sentences)
    if letter is not None:
        assert letter.invalid_sentences == bad_sentences
        assert_dead_letter_short(letter)
        assert letter.key == key and letter.origin == outcome.origin
        assert len(list(letter.invalid_citations())) == len(invalid)
        if value is not None:
            assert letter.value == value[: limits.max_message_bytes]
    assert all(c.seconds >= 0 for c in outcome.checked)
    assert all(c.seconds == 0 for c in invalid)


@FUZZ_SETTINGS
@given(
    world=worlds(),
    data=st.data(),
    origin=st.builds(Origin, st.text(max_size=300), INT64, INT64),
    limits=limits_strategy,
)
def test_check_message_accounts_for_every_citation(
    world: list[dict[str, Any]], data: st.DataObject, origin: Origin, limits: Limits
) -> None:
    """``check_message`` on any value (or none) and any origin: verdicts plus
    ``DeadLetter.invalid_citations()`` give each citation of the message exactly once, and one
    dead letter at most, short, keeping the (head of the) value and the origin."""
    _examples["check_message"] += 1
    store = ChunkStore()
    for record in world:
        store.apply(decode_chunk(record))
    value = data.draw(st.one_of(st.none(), citation_lines(world)), label="value")
    key = data.draw(keys, label="key")
    outcome = check_message(value, key, origin, store=store, policy=Policy(limits=limits))
    assert outcome.origin == origin
    assert_accounted_for(outcome, value, key, limits)


# -- the chunk store ------------------------------------------------------------------------


@st.composite
def store_histories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[Any], Limits]:
    """Chunk records and deletions, near the world or hostile, in any order."""
    world = draw(worlds())
    deletion = st.builds(
        lambda chunk_id: {"chunk_id": chunk_id, "deleted": True},
        st.sampled_from([r["chunk_id"] for r in world] + ["d0#9", "nowhere"]),
    )
    extra = draw(st.lists(st.one_of(near_chunks(world), deletion, json_value), max_size=12))
    history = draw(st.permutations([*world, *extra]))
    limits = draw(limits_strategy)
    return world, history, limits


def _check_views(store: ChunkStore, live: dict[str, Chunk]) -> None:
    """Every document view is faithful to its live chunks and not much larger than their text."""
    assert store.chunk_count == len(live)
    for doc_id in {chunk.doc_id for chunk in live.values()} | {"d0", "d1", "d2"}:
        siblings = [chunk for chunk in live.values() if chunk.doc_id == doc_id]
        version = store.live_version(doc_id)
        view = store.document(doc_id)
        if not siblings:
            assert version is None and view is None
            continue
        assert view is not None and view.version == version
        chunks = [chunk for chunk in siblings if chunk.doc_version == version]
        assert chunks, "the live version is no live chunk's version"
        assert sorted(p.chunk.chunk_id for p in view.placements) == sorted(
            chunk.chunk_id for chunk in chunks
        )
        total = sum(len(chunk.text) for chunk in chunks)
        assert len(view.text) <= 2 * total + 4096 + len(chunks), "a view padded beyond its text"
        for placement in view.placements:
            assert view.text[placement.start : placement.end] == placement.chunk.text
        assert len(view.folded.text) <= 18 * len(view.text)  # NFKC expands at most 18-fold


@FUZZ_SETTINGS
@given(history=store_histories(), data=st.data(), policy=policies)
def test_chunk_stores_build_faithful_bounded_views_and_checks_never_raise(
    history: tuple[list[dict[str, Any]], list[Any], Limits], data: st.DataObject, policy: Policy
) -> None:
    """Any sequence of chunk records and deletions (hostile offsets, ordinals, texts, versions)
    applied to a ``ChunkStore``: ``document()`` never raises, places every live chunk of the live
    version exactly where its text is, and never builds a view much larger than that text;
    then checking citations against the store never raises, never stalls, and a repair always
    lies inside a live chunk of the cited document."""
    _examples["store"] += 1
    world, records, limits = history
    store = ChunkStore()
    live: dict[str, Chunk] = {}
    for record in records:
        try:
            item = decode_chunk(record, limits)
        except RecordError:
            continue
        store.apply(item)
        live.pop(item.chunk_id, None)
        if not isinstance(item, ChunkDeletion):
            live[item.chunk_id] = item
        _check_views(store, live)
    for record in data.draw(st.lists(near_citations(world), max_size=6), label="citations"):
        for item in decode_citations(record, policy.limits):
            if type(item) is not Citation:
                continue
            started = time.thread_time()
            verdict = check_citation(item, store, policy)
            assert time.thread_time() - started < STALL_SECONDS, "one citation stalled"
            assert verdict.status in Status and verdict.status is not Status.INVALID
            event(f"verdict {verdict.status.value} {verdict.reason}")
            _assert_publishable(verdict, Origin("rag.answers", 0, 0), "sweep")
            if verdict.repair is not None:
                chunk = store.chunk(verdict.repair.chunk_id)
                assert chunk is not None and chunk.doc_id == item.doc_id
                assert 0 <= verdict.repair.start < verdict.repair.end <= len(chunk.text)
