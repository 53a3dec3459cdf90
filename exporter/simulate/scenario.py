"""A seeded, realistic scenario: a document store, answers citing it, then the store after change.

Every document goes through at most one change, drawn by share:

- ``resize``: re-chunked with a larger chunk size (the 400 -> 512 token case): drift;
- ``retypeset``: re-extracted by another parser: same words, new typography and line wrapping,
  same sentence groups per chunk: drift that folding must repair, never leave unrepaired;
- ``refresh``: reworded and reissued under a new version: superseded, never relocated;
- ``silent_edit``: reworded *without* a version bump: the edited sentences are not found;
- ``delete``: removed from the store.

Answer events carry their ``sentences``: one claim per citation (the cited text, restated),
framing around them (an opener, a sign-off), and with ``uncited_share`` a claim taken from the
answer's main document that no citation supports; ``expected_coverage`` says which is which.
With ``misclaim_share`` a cited claim misstates a number of its quote (the lexical judge flags
it); with ``reworded_share`` one is restated after a lead-in ("According to the source, ..."),
which the lexical judge cannot settle and a model judge can (the demo's share of them).

With ``hint_share`` a citation carries ``doc_span`` and ``doc_sha256``, its position in the
whole document and that document's fingerprint: a repeated sentence cited with a hint needs no
context, in any document, so a sweep shows what the hint decides after a chunk-size change and
what it must not decide after a re-extraction.

The expected verdict of every citation is computed from the ground truth the generator keeps
(where each sentence sits in each rendering), not by running the relocator.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from exporter.checks.compare import FoldedQuote
from exporter.checks.nearby import span_check
from exporter.defaults import DEFAULT_THRESHOLD
from exporter.records.fingerprint import document_fingerprint
from exporter.records.limits import DEFAULT_LIMITS
from exporter.simulate.chunker import CutChunk, cut_by_groups, pack_sentences
from exporter.simulate.text import (
    BOILERPLATE,
    Document,
    Rendering,
    Style,
    make_document,
    make_sentence,
    render,
)

__all__ = ["Scenario", "ScenarioConfig", "build_scenario"]

TOPICS = ("pricing", "security", "legal", "billing", "product", "onboarding", "support", "api")
SOURCES = ("acme-docs", "globex-kb", "initech-wiki", "umbrella-pdf")
CONTEXT_LENGTH = 32
# Framing an assistant wraps its answers in (each one the built-in classifier calls framing).
OPENERS = (
    "Thanks for reaching out!",
    "Happy to help with that.",
    "Here is what I found:",
    "Good question.",
)
SIGN_OFFS = (
    "Let me know if you have any other questions.",
    "Hope this helps!",
    "Is there anything else I can help you with?",
)
# Lead-ins of a reworded claim: the claim still says what its quote says, in other words.
LEAD_INS = (
    "According to the source, ",
    "The documentation says that ",
    "As the document puts it, ",
)
_STOCK = frozenset(tuple(s.split(" ")) for s in BOILERPLATE)
_EPOCH = datetime(2026, 10, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ScenarioConfig:
    """Knobs of the generator; shares are fractions of documents."""

    seed: int = 7
    answers: int = 2000
    documents: int | None = None
    chunk_size: int = 1600
    new_chunk_size: int = 2048
    resize_share: float = 0.10
    retypeset_share: float = 0.05
    refresh_share: float = 0.05
    silent_edit_share: float = 0.02
    delete_share: float = 0.02
    context_share: float = 0.6
    boilerplate_share: float = 0.3
    standalone_share: float = 0.2
    # answer events asserting one claim no citation supports (coverage's uncited claims)
    uncited_share: float = 0.1
    framing_share: float = 0.5
    # cited claims whose first number the answer got wrong (for the entailment judges)
    misclaim_share: float = 0.02
    # cited claims restated after a lead-in: faithful, but only a model judge can tell
    reworded_share: float = 0.0
    # citations carrying a position hint: doc_span and the document's doc_sha256
    hint_share: float = 0.0
    invalid_lines: int = 0
    threshold: float = DEFAULT_THRESHOLD

    @property
    def document_count(self) -> int:
        return self.documents if self.documents is not None else max(10, self.answers // 40)

    def shares(self) -> dict[str, float]:
        return {
            "resize": self.resize_share,
            "retypeset": self.retypeset_share,
            "refresh": self.refresh_share,
            "silent_edit": self.silent_edit_share,
            "delete": self.delete_share,
        }

    def validate(self) -> None:
        shares = self.shares()
        if any(not 0.0 <= s <= 1.0 for s in shares.values()) or sum(shares.values()) > 1.0:
            raise ValueError("change shares must each be in [0, 1] and add up to at most 1")
        if not all(
            0.0 <= share <= 1.0
            for share in (
                self.uncited_share,
                self.framing_share,
                self.misclaim_share,
                self.reworded_share,
                self.hint_share,
            )
        ):
            raise ValueError(
                "the uncited, framing, misclaim, reworded and hint shares must each be in [0, 1]"
            )
        if self.answers < 1 or self.document_count < 1:
            raise ValueError("need at least one answer and one document")
        if not 0 < self.chunk_size < self.new_chunk_size:
            raise ValueError("new chunk size must be larger than the chunk size")


@dataclass
class _Doc:
    doc_id: str
    source: str
    change: str
    document: Document
    rendering: Rendering
    chunks: list[CutChunk]
    # after the change
    version: str = "v1"
    new_rendering: Rendering | None = None
    new_chunks: list[CutChunk] = field(default_factory=list)
    edited: frozenset[int] = frozenset()
    new_chunker: str = ""
    # the live document has the fingerprint it had: a position hint may hold in it
    fingerprint_kept: bool = True


@dataclass
class Scenario:
    """Everything a scenario writes, as JSON-ready records."""

    config: ScenarioConfig
    chunks_before: list[dict[str, Any]]
    chunk_updates: list[dict[str, Any]]
    citation_lines: list[dict[str, Any] | bytes]
    expected: list[dict[str, Any]]
    doc_changes: dict[str, str] = field(default_factory=dict)
    expected_coverage: list[dict[str, Any]] = field(default_factory=list)
    # the citations whose claim misstates a number of their quote: not entailed
    misclaims: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "documents": self.config.document_count,
            "chunks_before": len(self.chunks_before),
            "chunk_updates": len(self.chunk_updates),
            "citations": len(self.expected),
            "invalid_lines": self.config.invalid_lines,
            "expected_statuses": dict(Counter(e["status"] for e in self.expected)),
            "changes": dict(Counter(e["change"] for e in self.expected)),
            "coverage": {
                "answers": len(self.expected_coverage),
                "claims": sum(len(e["claims"]) for e in self.expected_coverage),
                "framing": sum(len(e["framing"]) for e in self.expected_coverage),
                "uncited": sum(len(e["uncited"]) for e in self.expected_coverage),
            },
        }


def _plan_changes(rng: random.Random, config: ScenarioConfig) -> list[str]:
    count = config.document_count
    plan: list[str] = []
    for change, share in config.shares().items():
        plan += [change] * round(share * count)
    plan = plan[:count] + ["none"] * max(0, count - len(plan))
    rng.shuffle(plan)
    return plan


def _chunk_records(
    doc: _Doc, chunks: list[CutChunk], version: str, chunker: str
) -> list[dict[str, Any]]:
    return [
        {
            "doc_id": doc.doc_id,
            "doc_version": version,
            "chunk_id": f"{doc.doc_id}#{c.ordinal}",
            "text": c.text,
            "ordinal": c.ordinal,
            "doc_offset": c.doc_offset,
            "source": doc.source,
            "chunker": chunker,
        }
        for c in chunks
    ]


def _reword(
    rng: random.Random, document: Document, share: float, insert: float
) -> tuple[Document, frozenset[int]]:
    """Replace a share of the non-stock sentences (and maybe insert new ones)."""
    taken = {s for s in document.sentences()}
    edited: set[int] = set()
    paragraphs = []
    index = 0
    for paragraph in document.paragraphs:
        sentences = []
        for sentence in paragraph:
            if sentence not in _STOCK and rng.random() < share:
                replacement = tuple(make_sentence(rng))
                while replacement in taken:
                    replacement = tuple(make_sentence(rng))
                taken.add(replacement)
                sentences.append(replacement)
                edited.add(index)
            else:
                sentences.append(sentence)
            if insert and rng.random() < insert:
                extra = tuple(make_sentence(rng))
                if extra not in taken:
                    taken.add(extra)
                    sentences.append(extra)
            index += 1
        paragraphs.append(tuple(sentences))
    return Document(tuple(paragraphs)), frozenset(edited)


def _make_doc(index: int, change: str, config: ScenarioConfig) -> _Doc:
    rng = random.Random(f"{config.seed}:doc:{index}")
    boilerplate = change != "silent_edit" and rng.random() < config.boilerplate_share
    document = make_document(rng, rng.randint(30, 90), boilerplate=boilerplate)
    rendering = render(document, Style(wrap=80, typeset=False))
    groups = pack_sentences(rendering.spans, config.chunk_size)
    doc = _Doc(
        doc_id=f"doc-{index:05d}",
        source=rng.choice(SOURCES),
        change=change,
        document=document,
        rendering=rendering,
        chunks=cut_by_groups(rendering.text, rendering.spans, groups),
    )
    if change in ("none", "delete"):
        doc.new_rendering, doc.new_chunks = rendering, doc.chunks
    elif change == "resize":
        doc.new_rendering = rendering
        new_groups = pack_sentences(rendering.spans, config.new_chunk_size)
        doc.new_chunks = cut_by_groups(rendering.text, rendering.spans, new_groups)
        doc.new_chunker = f"pdfx-1/sentence-{config.new_chunk_size}"
    elif change == "retypeset":
        doc.new_rendering = render(document, Style(wrap=72, typeset=True, seed=index))
        doc.new_chunks = cut_by_groups(doc.new_rendering.text, doc.new_rendering.spans, groups)
        doc.new_chunker = f"pdfx-2/sentence-{config.chunk_size}"
    elif change == "silent_edit":
        edited_doc, doc.edited = _reword(rng, document, 0.15, 0.0)
        doc.new_rendering = render(edited_doc, Style(wrap=80, typeset=False))
        doc.new_chunks = cut_by_groups(doc.new_rendering.text, doc.new_rendering.spans, groups)
        doc.new_chunker = f"pdfx-1/sentence-{config.chunk_size}"
    elif change == "refresh":
        doc.version = "v2"
        refreshed, doc.edited = _reword(rng, document, 0.3, 0.1)
        doc.new_rendering = render(refreshed, Style(wrap=80, typeset=False))
        new_groups = pack_sentences(doc.new_rendering.spans, config.chunk_size)
        doc.new_chunks = cut_by_groups(doc.new_rendering.text, doc.new_rendering.spans, new_groups)
        doc.new_chunker = f"pdfx-1/sentence-{config.chunk_size}"
    assert doc.new_rendering is not None
    doc.fingerprint_kept = _fingerprint(doc.new_rendering.text, doc.new_chunks) == (
        _fingerprint(rendering.text, doc.chunks)
    )
    return doc


def _updates(doc: _Doc) -> list[dict[str, Any]]:
    if doc.change == "none":
        return []
    old_ids = {f"{doc.doc_id}#{c.ordinal}" for c in doc.chunks}
    if doc.change == "delete":
        return [{"chunk_id": chunk_id, "deleted": True} for chunk_id in sorted(old_ids)]
    records = _chunk_records(doc, doc.new_chunks, doc.version, doc.new_chunker)
    new_ids = {r["chunk_id"] for r in records}
    records += [{"chunk_id": i, "deleted": True} for i in sorted(old_ids - new_ids)]
    return records


@dataclass(frozen=True, slots=True)
class _Cited:
    doc: _Doc
    first: int
    last: int
    chunk: CutChunk
    with_context: bool
    hinted: bool = False


def _quote_check(quote: str, text: str, span: tuple[int, int], threshold: float) -> str | None:
    """The contract's quote check of a span in bounds (exporter.checks.nearby.span_check): None
    when it holds the quote, else the failed check."""
    start, end = span
    if text[start:end] == quote:
        return None
    matches, _, moved = span_check(
        FoldedQuote(quote),
        text,
        span,
        threshold=threshold,
        max_quote_chars=DEFAULT_LIMITS.max_quote_chars,
    )
    if matches:
        return None
    return "span_shifted" if moved else "quote_mismatch"


def _expected(cited: _Cited, record: dict[str, Any], threshold: float) -> dict[str, Any]:
    """The verdict the contract prescribes, from ground truth."""
    doc, chunk = cited.doc, cited.chunk
    quote, (start, end) = record["quote"], record["chunk_span"]
    result: dict[str, Any] = {
        "citation_id": record["citation_id"],
        "doc_id": doc.doc_id,
        "change": doc.change,
        "status": "ok",
        "reason": None,
        "repair": None,
    }
    if doc.change == "delete":
        return result | {"status": "document_missing", "reason": "document_missing"}
    assert doc.new_rendering is not None
    live = {c.ordinal: c for c in doc.new_chunks}
    now = live.get(chunk.ordinal)
    failed: str | None
    if now is None:
        failed = "chunk_missing"
    elif end > len(now.text):
        failed = "out_of_bounds"
    else:
        failed = _quote_check(quote, now.text, (start, end), threshold)
        if failed is None:
            return result
    if doc.change == "refresh":
        return result | {"status": "superseded", "reason": failed}
    unrepaired = result | {"status": "drift_unrepaired"}
    if any(i in doc.edited for i in range(cited.first, cited.last + 1)):
        return unrepaired | {"reason": "quote_not_found"}
    sentences = doc.document.sentences()
    copies = [k for k, s in enumerate(sentences) if s == sentences[cited.first]]
    repeated = cited.first == cited.last and len(copies) > 1
    spans = doc.new_rendering.spans
    begin, finish = spans[cited.first][0], spans[cited.last][1]
    how = "unique"
    if repeated:
        how = "context"
        if not cited.with_context:
            # the documented hint rule, from ground truth: the document has its fingerprint,
            # and the quote is still there byte for byte, at the offsets it had
            old = doc.rendering.spans[cited.first]
            held = (
                doc.fingerprint_kept
                and (begin, finish) == old
                and doc.new_rendering.text[begin:finish] == quote
            )
            if not (cited.hinted and held):
                return unrepaired | {"reason": "ambiguous"}
            how = "position_hint"
    holder = next((c for c in doc.new_chunks if c.doc_offset <= begin and finish <= c.end), None)
    if holder is None:
        return unrepaired | {"reason": "straddles_chunks"}
    new_text = doc.new_rendering.text
    return result | {
        "status": "drift_repaired",
        "reason": failed,
        "repair": {
            "chunk_id": f"{doc.doc_id}#{holder.ordinal}",
            "chunk_span": [begin - holder.doc_offset, finish - holder.doc_offset],
            "method": "exact" if new_text[begin:finish] == quote else "normalised",
            "how": how,
            "shift": None if now is None else begin - (now.doc_offset + start),
        },
    }


def _cite(rng: random.Random, doc: _Doc, config: ScenarioConfig, hinted: bool) -> _Cited:
    chunk = rng.choice(doc.chunks)
    first = rng.randint(chunk.first_sentence, chunk.last_sentence)
    last = first + 1 if first < chunk.last_sentence and rng.random() < 0.2 else first
    must_have_context = doc.change not in ("none", "resize") and not hinted
    stock = first == last and doc.document.sentences()[first] in _STOCK
    with_context = rng.random() < config.context_share or (stock and must_have_context)
    return _Cited(doc, first, last, chunk, with_context, hinted)


def _citation_record(cited: _Cited, citation_id: str, answer_id: str) -> dict[str, Any]:
    doc, chunk = cited.doc, cited.chunk
    text = doc.rendering.text
    begin = doc.rendering.spans[cited.first][0]
    finish = doc.rendering.spans[cited.last][1]
    record: dict[str, Any] = {
        "citation_id": citation_id,
        "answer_id": answer_id,
        "doc_id": doc.doc_id,
        "doc_version": "v1",
        "chunk_id": f"{doc.doc_id}#{chunk.ordinal}",
        "chunk_span": [begin - chunk.doc_offset, finish - chunk.doc_offset],
        "quote": text[begin:finish],
    }
    if cited.with_context:
        record["prefix"] = text[max(0, begin - CONTEXT_LENGTH) : begin]
        record["suffix"] = text[finish : finish + CONTEXT_LENGTH]
    if cited.hinted:
        record["doc_span"] = [begin, finish]
        record["doc_sha256"] = _fingerprint(text, doc.chunks)
    return record


def _fingerprint(text: str, chunks: list[CutChunk]) -> str:
    """The fingerprint of a document as its chunks tile it (to the end of its last chunk; the
    whitespace between chunks, which no chunk holds, is a space in any case)."""
    return document_fingerprint(text[: max(chunk.end for chunk in chunks)])


def _restated(doc: _Doc, first: int, last: int) -> str:
    """The claim an answer makes from sentences ``first..last`` of a document, on one line."""
    return " ".join(" ".join(s) for s in doc.document.sentences()[first : last + 1])


def _answer_sentences(
    rng: random.Random, home: _Doc, cited: list[_Cited], config: ScenarioConfig
) -> tuple[list[str], list[int], dict[str, list[int]]]:
    """The sentences of an answer, the sentence each citation supports, and the ground truth.

    Drawn from ``rng``, a generator of their own: the citations stay what they were before
    answers carried sentences.
    """
    parts: list[tuple[str, str]] = [("claim", _restated(c.doc, c.first, c.last)) for c in cited]
    if rng.random() < config.uncited_share:
        sentence = rng.randrange(len(home.document.sentences()))
        parts.insert(rng.randint(0, len(parts)), ("uncited", _restated(home, sentence, sentence)))
    if rng.random() < config.framing_share:
        parts.insert(0, ("framing", rng.choice(OPENERS)))
    if rng.random() < config.framing_share:
        parts.append(("framing", rng.choice(SIGN_OFFS)))
    supported = [i for i, (kind, _) in enumerate(parts) if kind == "claim"]
    truth = {
        "claims": [i for i, (kind, _) in enumerate(parts) if kind != "framing"],
        "framing": [i for i, (kind, _) in enumerate(parts) if kind == "framing"],
        "uncited": [i for i, (kind, _) in enumerate(parts) if kind == "uncited"],
    }
    return [text for _, text in parts], supported, truth


_NUMBER = re.compile(r"\d+")


def _misstated(claim: str) -> str | None:
    """The claim with its first number one higher (None when it states no number)."""
    found = _NUMBER.search(claim)
    if found is None:
        return None
    wrong = str(int(found.group()) + 1)
    return claim[: found.start()] + wrong + claim[found.end() :]


def _reworded(claim: str, rng: random.Random) -> str:
    """The claim after a lead-in, its first letter lowered unless it starts an acronym."""
    if claim[:1].isupper() and claim[1:2].islower():
        claim = claim[0].lower() + claim[1:]
    return rng.choice(LEAD_INS) + claim


_BROKEN_LINES = (
    b'{"answer_id": "ans-broken", "citations": [{"citation_id": "cit-trunc',
    b'{"citation_id": "cit-bad-span", "answer_id": "a", "doc_id": "d", "doc_version": "v1", '
    b'"chunk_id": "c", "chunk_span": "12-40", "quote": "x"}',
    b'["not", "an", "object"]',
    b'{"citation_id": 17, "answer_id": "a", "doc_id": "d", "doc_version": "v1", '
    b'"chunk_id": "c", "chunk_span": [1, 2], "quote": "x"}',
    b"\xff\xfe not utf-8",
)


def build_scenario(config: ScenarioConfig) -> Scenario:
    """Generate the whole scenario in memory (deterministic for a given config)."""
    config.validate()
    rng = random.Random(config.seed)
    plan = _plan_changes(rng, config)
    docs = [_make_doc(i + 1, change, config) for i, change in enumerate(plan)]

    chunks_before: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for doc in docs:
        chunks_before += _chunk_records(
            doc, doc.chunks, "v1", f"pdfx-1/sentence-{config.chunk_size}"
        )
        updates += _updates(doc)

    lines: list[dict[str, Any] | bytes] = []
    expected: list[dict[str, Any]] = []
    coverage: list[dict[str, Any]] = []
    misclaims: list[dict[str, Any]] = []
    wording = random.Random(f"{config.seed}/sentences")
    misstating = random.Random(f"{config.seed}/misclaims")
    rewording = random.Random(f"{config.seed}/rewordings")  # draws apart: the rest stays as is
    hinting = random.Random(f"{config.seed}/hints")
    citation_number = 0
    for answer_number in range(1, config.answers + 1):
        answer_id = f"ans-{answer_number:06d}"
        topic = rng.choice(TOPICS)
        home = rng.choice(docs)
        citations = []
        all_cited = []
        for _ in range(rng.randint(1, 4)):
            doc = home if rng.random() < 0.8 else rng.choice(docs)
            cited = _cite(rng, doc, config, hinting.random() < config.hint_share)
            citation_number += 1
            record = _citation_record(cited, f"cit-{citation_number:07d}", answer_id)
            citations.append(record)
            all_cited.append(cited)
            expected.append(_expected(cited, record, config.threshold))
        sentences, supported, truth = _answer_sentences(wording, home, all_cited, config)
        for record, sentence_index in zip(citations, supported, strict=True):
            record["sentence_index"] = sentence_index
            if misstating.random() < config.misclaim_share:
                wrong = _misstated(sentences[sentence_index])
                if wrong is not None:
                    sentences[sentence_index] = wrong
                    misclaims.append({"citation_id": record["citation_id"], "claim": wrong})
            elif rewording.random() < config.reworded_share:
                sentences[sentence_index] = _reworded(sentences[sentence_index], rewording)
        emitted_at = (_EPOCH + timedelta(seconds=answer_number)).isoformat().replace("+00:00", "Z")
        if rng.random() < config.standalone_share:
            for record in citations:
                lines.append(record | {"emitted_at": emitted_at, "topic": topic})
        else:
            for record in citations:
                del record["answer_id"]
            lines.append(
                {
                    "answer_id": answer_id,
                    "emitted_at": emitted_at,
                    "topic": topic,
                    "sentences": sentences,
                    "citations": citations,
                }
            )
            coverage.append({"answer_id": answer_id, "topic": topic} | truth)
    for number in range(config.invalid_lines):
        lines.insert(rng.randint(0, len(lines)), _BROKEN_LINES[number % len(_BROKEN_LINES)])
    changes = {doc.doc_id: doc.change for doc in docs}
    return Scenario(config, chunks_before, updates, lines, expected, changes, coverage, misclaims)
