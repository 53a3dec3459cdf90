"""Real text for the relocator: Debian's man pages in German, Japanese and English.

Each page is rendered twice by groff, at 80 columns ("before") and at 100 ("re-extraction":
every line rewrapped and re-justified), without hyphenation, so both renderings hold the same
non-whitespace characters in the same order. That sequence is the ground truth: a span of one
rendering maps to the other through its first and last non-whitespace character, so what the
engine should answer is known without ever asking the engine.

Used by tests/test_manpage_corpora.py; needs ``manpages-de``, ``manpages-ja`` and groff.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import re
import subprocess
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from exporter.checks.engine import Policy
from exporter.checks.normalize import fold
from exporter.file_sweep import load_store, run_sweep
from exporter.pipeline.summary import SweepSummary
from exporter.records.fingerprint import document_fingerprint
from exporter.sources.jsonl import JsonLines

MAN = Path("/usr/share/man")
# English pages are the originals of the German translations: the same commands in every
# language, and a set that does not depend on whatever else the machine has installed.
MAN_DIRS = {"de": MAN / "de" / "man1", "ja": MAN / "ja" / "man1", "en": MAN / "man1"}
WIDTH_BEFORE = 80
WIDTH_AFTER = 100
CHUNK_CHARS = 1600
RESIZED_CHUNK_CHARS = 2048
PAGES = 40
MIN_PAGE_CHARS, MAX_PAGE_CHARS = 3_000, 60_000
MIN_QUOTE_CHARS, MAX_QUOTE_CHARS = 20, 400
# sentences sampled per language besides every repeated one
SAMPLED_QUOTES = 300
RENDER_TIMEOUT = 30.0

# Sentence ends; the terminator belongs to the sentence. Japanese ones never occur in the
# German or English pages, so one expression serves all three languages.
_SENTENCE_END = re.compile(r"\.(?=[ \n])|[!?](?= )|[。！？]")  # noqa: RUF001 (full-width)
_SPACE = re.compile(r"\s+")
_NON_SPACE = re.compile(r"\S")


def render(page: Path, width: int) -> str | None:
    """The page as plain text at ``width`` columns, or None when groff fails or prints nothing.

    ``-k -K utf-8`` runs preconv (``preconv -e UTF-8``) inside groff: one process, not a pipe.
    """
    try:
        source = gzip.decompress(page.read_bytes())
        done = subprocess.run(
            ["groff", "-k", "-K", "utf-8", "-man", "-Tutf8", "-P-cbou", f"-rLL={width}n", "-rHY=0"],
            input=source,
            capture_output=True,
            timeout=RENDER_TIMEOUT,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
            check=False,
        )
    except (OSError, EOFError, gzip.BadGzipFile, subprocess.TimeoutExpired):
        return None
    text = done.stdout.decode("utf-8", errors="replace")
    if done.returncode != 0 or not text.strip() or "\x08" in text or "\x1b" in text:
        return None
    return text


def squeeze(text: str) -> str:
    """The text without any whitespace: what both renderings of a page share."""
    return _SPACE.sub("", text)


def occurrences(haystack: str, needle: str) -> int:
    """How often ``needle`` occurs in ``haystack``, overlapping copies included."""
    count, at = 0, haystack.find(needle)
    while at != -1:
        count += 1
        at = haystack.find(needle, at + 1)
    return count


@dataclass(frozen=True, slots=True)
class Page:
    """One man page in both renderings, with the positions of their non-whitespace characters."""

    doc_id: str
    before: str
    after: str
    squeezed: str
    _before_marks: list[int] = field(repr=False)
    _after_marks: list[int] = field(repr=False)

    @classmethod
    def of(cls, doc_id: str, before: str, after: str) -> Page:
        before_marks = [m.start() for m in _NON_SPACE.finditer(before)]
        after_marks = [m.start() for m in _NON_SPACE.finditer(after)]
        return cls(doc_id, before, after, squeeze(before), before_marks, after_marks)

    def to_after(self, start: int, end: int) -> tuple[int, int]:
        """Map a span of ``before`` (starting and ending on non-whitespace) to ``after``."""
        first = bisect_left(self._before_marks, start)
        last = bisect_left(self._before_marks, end - 1)
        return self._after_marks[first], self._after_marks[last] + 1


@dataclass(frozen=True, slots=True)
class Selection:
    """The pages kept for one language, and how many were dropped for rendering differently."""

    pages: list[Page]
    dropped: int


def _candidates(language: str) -> list[Path]:
    directory = MAN_DIRS[language]
    names = sorted(p.name for p in directory.glob("*.1.gz") if not p.is_symlink())
    if language == "en":
        german = MAN_DIRS["de"]
        names = [n for n in names if (german / n).is_file()]
    return [directory / n for n in names]


def _both(page: Path) -> tuple[str | None, str | None]:
    before = render(page, WIDTH_BEFORE)
    if before is None or not MIN_PAGE_CHARS <= len(before) <= MAX_PAGE_CHARS:
        return None, None
    return before, render(page, WIDTH_AFTER)


def select_pages(language: str, wanted: int = PAGES) -> Selection:
    """The first ``wanted`` pages of man1 by name whose rendering has a useful size.

    Rendered a batch at a time on a few threads (groff does the work, in its own processes).
    """
    pages: list[Page] = []
    dropped = 0
    candidates = _candidates(language)
    batch = 2 * (os.cpu_count() or 2)
    with ThreadPoolExecutor(max_workers=batch) as pool:
        for at in range(0, len(candidates), batch):
            group = candidates[at : at + batch]
            for path, (before, after) in zip(group, pool.map(_both, group), strict=True):
                if before is None or after is None or len(pages) == wanted:
                    continue
                if squeeze(before) != squeeze(after):
                    dropped += 1
                    continue
                doc_id = f"{language}/{path.name.removesuffix('.gz')}"
                pages.append(Page.of(doc_id, before, after))
            if len(pages) == wanted:
                break
    return Selection(pages, dropped)


def load_page(language: str, name: str) -> Page | None:
    """One named page (``setfacl.1``) in both renderings; None when it is absent or differs."""
    before, after = _both(MAN_DIRS[language] / f"{name}.gz")
    if before is None or after is None or squeeze(before) != squeeze(after):
        return None
    return Page.of(f"{language}/{name}", before, after)


@dataclass(frozen=True, slots=True)
class Cut:
    """One chunk of a rendering: whole lines, ``text`` starting at ``doc_offset``."""

    ordinal: int
    doc_offset: int
    text: str

    @property
    def end(self) -> int:
        return self.doc_offset + len(self.text)


def cut_lines(text: str, limit: int) -> list[Cut]:
    """Greedy packing of whole lines into chunks of at most ``limit`` characters (a longer
    line is a chunk of its own); the chunks are contiguous and cover the text."""
    line_ends = [m.end() for m in re.finditer("\n", text)]
    if not line_ends or line_ends[-1] != len(text):
        line_ends.append(len(text))
    bounds: list[tuple[int, int]] = []
    start = end = 0
    for line_end in line_ends:
        if line_end - start > limit and end > start:
            bounds.append((start, end))
            start = end
        end = line_end
    if end > start:
        bounds.append((start, end))
    return [Cut(n, s, text[s:e]) for n, (s, e) in enumerate(bounds)]


def holder(cuts: list[Cut], start: int, end: int) -> Cut | None:
    """The chunk holding the whole span, or None when it straddles two."""
    return next((c for c in cuts if c.doc_offset <= start and end <= c.end), None)


def chunk_records(doc_id: str, cuts: list[Cut]) -> list[dict[str, Any]]:
    return [
        {
            "doc_id": doc_id,
            "doc_version": "v1",
            "chunk_id": f"{doc_id}#{c.ordinal}",
            "text": c.text,
            "ordinal": c.ordinal,
            "doc_offset": c.doc_offset,
        }
        for c in cuts
    ]


def sentences(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the sentences of ``text``, surrounding whitespace stripped."""
    start = 0
    for found in _SENTENCE_END.finditer(text):
        sentence = text[start : found.end()]
        stripped = sentence.lstrip()
        begin = start + len(sentence) - len(stripped)
        end = begin + len(stripped.rstrip())
        if end > begin:
            yield begin, end
        start = found.end()


@dataclass(frozen=True, slots=True)
class Quote:
    """A cited sentence of one page: its span in ``before`` and the chunk that held it."""

    citation_id: str
    page: Page
    start: int
    end: int
    chunk: Cut
    # its squeezed text occurs exactly once in the (squeezed) page: a place can be decided
    decidable: bool

    @property
    def text(self) -> str:
        return self.page.before[self.start : self.end]

    def record(self, *, hinted: bool) -> dict[str, Any]:
        """The citation as the answer side stored it: no prefix or suffix, maybe a hint (its
        offsets in the page, and the page's fingerprint: the chunks cover it, line by line)."""
        record: dict[str, Any] = {
            "citation_id": self.citation_id,
            "answer_id": f"ans-{self.citation_id}",
            "doc_id": self.page.doc_id,
            "doc_version": "v1",
            "chunk_id": f"{self.page.doc_id}#{self.chunk.ordinal}",
            "chunk_span": [self.start - self.chunk.doc_offset, self.end - self.chunk.doc_offset],
            "quote": self.text,
        }
        if hinted:
            record["doc_span"] = [self.start, self.end]
            record["doc_sha256"] = document_fingerprint(self.page.before)
        return record


def quotes(language: str, pages: list[Page], sampled: int = SAMPLED_QUOTES) -> list[Quote]:
    """Every repeated sentence, and ``sampled`` of the others, drawn with a fixed seed."""
    repeated: list[Quote] = []
    unique: list[Quote] = []
    for page in pages:
        cuts = cut_lines(page.before, CHUNK_CHARS)
        for start, end in sentences(page.before):
            chunk = holder(cuts, start, end)
            if chunk is None or not MIN_QUOTE_CHARS <= end - start <= MAX_QUOTE_CHARS:
                continue
            copies = occurrences(page.squeezed, squeeze(page.before[start:end]))
            quote = Quote("", page, start, end, chunk, copies == 1)
            (unique if quote.decidable else repeated).append(quote)
    chosen = repeated + random.Random(f"manpages/{language}").sample(
        unique, min(sampled, len(unique))
    )
    return [
        Quote(f"{language}-{n:05d}", q.page, q.start, q.end, q.chunk, q.decidable)
        for n, q in enumerate(chosen)
    ]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A re-extraction that moves text by a few characters, or by none (typography), applied to
    every chunk's text: ``pattern`` replaced by ``replacement``. Its ground truth is the
    replacement itself: every offset moves by the growth of the matches that end before it."""

    pattern: re.Pattern[str]
    replacement: str
    # False: every match is replaced by as many characters; nothing moves
    moves: bool = True

    def apply(self, text: str) -> tuple[str, list[int], list[int]]:
        """The rewritten text, the raw end of every match, and the growth up to and with it."""
        ends: list[int] = []
        growth: list[int] = []
        grown = 0

        def replace(match: re.Match[str]) -> str:
            nonlocal grown
            new = match.expand(self.replacement)
            grown += len(new) - len(match.group())
            ends.append(match.end())
            growth.append(grown)
            return new

        return self.pattern.sub(replace, text), ends, growth


def _prefix(marker: str) -> Rewrite:
    return Rewrite(re.compile(r"\A"), marker)


# The family of issue 22: k characters before every chunk's text (a page marker, a heading
# sigil, a byte-order mark), line breaks written as CR LF, indentation written with tabs (eight
# spaces a tab: the inverse of expanding tabs, the same shift the other way), a space before
# every line break; and, moving nothing, no-break spaces for spaces and typographic hyphens and
# apostrophes for ASCII ones.
REWRITES = {
    "prefix1": _prefix("§"),
    "prefix2": _prefix("# "),
    "prefix3": _prefix("[1]"),
    "prefix4": _prefix("[12]"),
    "prefix6": _prefix("Page 1"),
    "prefix8": _prefix("[Page 1]"),
    "bom": _prefix("\ufeff"),
    "crlf": Rewrite(re.compile("\n"), "\r\n"),
    "tabs": Rewrite(re.compile("(?m)^ {8}"), "\t"),
    # groff writes no trailing spaces, so stripping them moves nothing here: a re-extraction
    # that writes one before every line break (as PDF extractors do) is the same shift, the other
    # way (tests/test_span_shift.py strips them from a text that has them)
    "trailing": Rewrite(re.compile("(?<=\\S)\n"), " \n"),
    "nbsp": Rewrite(re.compile(r"(?<=\S) (?=\S)"), "\u00a0", moves=False),
    "hyphens": Rewrite(re.compile("-"), "\u2010", moves=False),
    "apostrophes": Rewrite(re.compile("'"), "\u2019", moves=False),
}
MOVING_REWRITES = [name for name, rewrite in REWRITES.items() if rewrite.moves]
TYPOGRAPHY_REWRITES = [name for name, rewrite in REWRITES.items() if not rewrite.moves]


@dataclass(frozen=True, slots=True)
class Live:
    """A page after a change: its text, its chunks, and where a span of ``before`` is now."""

    text: str
    cuts: list[Cut]
    _moves: list[tuple[list[int], list[int], int, int]] = field(default_factory=list, repr=False)
    _after: Page | None = None

    def place(self, start: int, end: int, chunk: Cut) -> tuple[int, int]:
        """Where ``[start, end)`` of ``before``, held by ``chunk`` of its cut, is now."""
        if self._after is not None:
            return self._after.to_after(start, end)
        if not self._moves:
            return start, end
        ends, growth, old_offset, new_offset = self._moves[chunk.ordinal]

        def moved(at: int) -> int:
            local = at - old_offset
            before = bisect_right(ends, local)
            return new_offset + local + (growth[before - 1] if before else 0)

        return moved(start), moved(end)


def live_state(page: Page, change: str) -> Live:
    """The live text of a page after ``change``, its chunks, and the ground truth of places."""
    if change == "none":
        return Live(page.before, cut_lines(page.before, CHUNK_CHARS))
    if change == "resize":
        return Live(page.before, cut_lines(page.before, RESIZED_CHUNK_CHARS))
    if change == "reextract":
        return Live(page.after, cut_lines(page.after, CHUNK_CHARS), _after=page)
    rewrite = REWRITES.get(change)
    if rewrite is None:
        raise ValueError(f"unknown change {change!r}")
    cuts: list[Cut] = []
    moves = []
    offset = 0
    for cut in cut_lines(page.before, CHUNK_CHARS):
        text, ends, growth = rewrite.apply(cut.text)
        cuts.append(Cut(cut.ordinal, offset, text))
        moves.append((ends, growth, cut.doc_offset, offset))
        offset += len(text)
    return Live("".join(c.text for c in cuts), cuts, moves)


def live_cuts(page: Page, change: str) -> tuple[str, list[Cut]]:
    """The live text of a page after ``change`` and its chunks."""
    live = live_state(page, change)
    return live.text, live.cuts


def chunk_file_records(pages: list[Page], change: str) -> list[dict[str, Any]]:
    """The before store, then the change as updates: new chunks replace the chunks of the same
    id, and the chunk ids the new cut no longer has are deleted (as the scenario does)."""
    records: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for page in pages:
        before = chunk_records(page.doc_id, cut_lines(page.before, CHUNK_CHARS))
        records += before
        if change == "none":
            continue
        new = chunk_records(page.doc_id, live_cuts(page, change)[1])
        gone = {r["chunk_id"] for r in before} - {r["chunk_id"] for r in new}
        updates += new + [{"chunk_id": i, "deleted": True} for i in sorted(gone)]
    return records + updates


def sweep(
    directory: Path, chunks: list[dict[str, Any]], citations: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run the file sweep on these records, as tests/test_scenario.py does; the verdicts."""
    chunks_path, citations_path = directory / "chunks.jsonl", directory / "citations.jsonl"
    chunks_path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in chunks))
    citations_path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in citations))
    summary = SweepSummary()
    store = load_store(JsonLines(str(chunks_path)), summary)
    out = io.BytesIO()
    run_sweep(store, JsonLines(str(citations_path)), Policy(), summary, out=out)
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


@dataclass(slots=True)
class Figures:
    """What one sweep did with one language's citations, judged against the ground truth."""

    language: str
    change: str
    hinted: bool
    citations: int = 0
    # the recorded span, read in the live chunk of the same id, is not where the quote is now
    # (and holds no copy of it either)
    moved: int = 0
    # moved, and passed as ok: what the issue 22 gate must not let through
    ok_moved: list[str] = field(default_factory=list)
    ok_max_shift: int = 0
    drifted: int = 0
    # drifted, and the squeezed quote occurs once in the squeezed page
    decidable: int = 0
    # drifted, and the true place lies inside one live chunk
    repairable: int = 0
    repaired: int = 0
    by_hint: int = 0
    refused: int = 0
    wrong: list[str] = field(default_factory=list)
    # repaired, with a shift that is not the true one
    wrong_shift: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)
    methods: dict[str, int] = field(default_factory=dict)
    # (status, reason) of every drifted citation
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def ok_moved_share(self) -> float:
        return len(self.ok_moved) / self.moved if self.moved else 0.0

    def line(self) -> str:
        return (
            f"{self.language} {self.change:<11} hints={'yes' if self.hinted else 'no ':<3} "
            f"citations={self.citations} moved={self.moved} "
            f"ok_moved={len(self.ok_moved)} ({self.ok_moved_share:.2%}, by up to "
            f"{self.ok_max_shift}) drifted={self.drifted} decidable={self.decidable} "
            f"repairable={self.repairable} repaired={self.repaired} by_hint={self.by_hint} "
            f"wrong={len(self.wrong)} wrong_shift={len(self.wrong_shift)} "
            f"refused_ambiguous={self.refused} "
            f"missed={len(self.missed)} false_alarms={len(self.false_alarms)} "
            f"methods={self.methods} drifted_outcomes={self.outcomes}"
        )


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _repaired_span(text: str, cuts: list[Cut], repair: dict[str, Any]) -> tuple[int, int]:
    """A repair's place in the live document, surrounding whitespace trimmed."""
    chunk = cuts[int(repair["chunk_id"].rsplit("#", 1)[1])]
    start, end = (chunk.doc_offset + at for at in repair["chunk_span"])
    return _trimmed(text, start, end)


def _moved(text: str, here: int, there: int) -> int:
    """Characters other than whitespace between two offsets of ``text``."""
    return len(squeeze(text[min(here, there) : max(here, there)]))


def _holds(quote: Quote, now: str) -> bool:
    """The text holds the quote, typography aside (it reads the same to a person)."""
    return fold(now).strip() == fold(quote.text).strip()


def tally(
    language: str, change: str, hinted: bool, chosen: list[Quote], verdicts: list[dict[str, Any]]
) -> Figures:
    """Hold every verdict to the ground truth of the change.

    A citation has moved when its recorded span, read in the live chunk of the same id, is not
    where the quote is now and does not hold the quote either (a copy of the same sentence at
    exactly those offsets reads right, and is no drift to a reader). A moved citation must not
    pass as ok; one that has not moved must.
    """
    figures = Figures(language, change, hinted, citations=len(chosen))
    by_id = {v["citation_id"]: v for v in verdicts}
    live: dict[str, Live] = {}
    for quote in chosen:
        page = quote.page
        if page.doc_id not in live:
            live[page.doc_id] = live_state(page, change)
        state = live[page.doc_id]
        text, cuts = state.text, state.cuts
        truth = state.place(quote.start, quote.end, quote.chunk)
        verdict = by_id[quote.citation_id]
        status, reason, repair = verdict["status"], verdict["reason"], verdict["repair"]
        if repair is not None:
            figures.methods[repair["method"]] = figures.methods.get(repair["method"], 0) + 1
            figures.by_hint += repair.get("how") == "position_hint"
            if _repaired_span(text, cuts, repair) != truth:
                figures.wrong.append(quote.citation_id)
        same = cuts[quote.chunk.ordinal] if quote.chunk.ordinal < len(cuts) else None
        start, end = quote.start - quote.chunk.doc_offset, quote.end - quote.chunk.doc_offset
        # a shift is where the quote is now minus where the recorded span points now
        shift = None if same is None else truth[0] - (same.doc_offset + start)
        if repair is not None and same is not None and repair["shift"] != shift:
            figures.wrong_shift.append(quote.citation_id)
        if same is not None and end <= len(same.text):
            at = _trimmed(text, same.doc_offset + start, same.doc_offset + end)
            if at == truth or _holds(quote, same.text[start:end]):
                if status != "ok":
                    figures.false_alarms.append(quote.citation_id)
                continue
            if status == "ok":
                shift = max(_moved(text, at[0], truth[0]), _moved(text, at[1], truth[1]))
                figures.ok_max_shift = max(figures.ok_max_shift, shift)
        figures.moved += 1
        if status == "ok":
            figures.ok_moved.append(quote.citation_id)
            continue
        if quote.decidable and reason == "quote_not_found":
            figures.false_alarms.append(quote.citation_id)
        figures.drifted += 1
        key = f"{status}/{reason}"
        figures.outcomes[key] = figures.outcomes.get(key, 0) + 1
        figures.decidable += quote.decidable
        inside = holder(cuts, *truth) is not None
        figures.repairable += inside
        figures.repaired += status == "drift_repaired"
        figures.refused += inside and reason == "ambiguous"
        if quote.decidable and inside and status != "drift_repaired":
            figures.missed.append(quote.citation_id)
    return figures
