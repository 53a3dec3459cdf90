"""The relocator's promises on real German, Japanese and English text (Debian's man pages).

The ground truth is two groff renderings of each page (see tests/manpage_corpus.py), never the
engine: a chunk-size change keeps every offset, a re-extraction moves every line, and what the
engine should answer follows from where each cited sentence lies in each rendering. Run with
``-s`` to see the figures per language and change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from manpage_corpus import (
    MAN_DIRS,
    MOVING_REWRITES,
    PAGES,
    TYPOGRAPHY_REWRITES,
    Figures,
    Quote,
    Selection,
    chunk_file_records,
    load_page,
    quotes,
    select_pages,
    sweep,
    tally,
)

from exporter.capture import Chunk, document_fingerprint, from_anthropic
from exporter.checks.compare import FoldedQuote
from exporter.checks.relocate import FOUND, NOT_FOUND, relocate
from exporter.checks.store import ChunkStore, DocumentView
from exporter.records.decode import decode_chunk

GOLDEN = Path(__file__).parent / "data" / "golden.json"
_ABSENT = [str(d) for d in MAN_DIRS.values() if not d.is_dir()]
if _ABSENT:
    pytest.skip(
        f"no man pages in {', '.join(_ABSENT)}: apt-get install manpages-de manpages-ja",
        allow_module_level=True,
    )

LANGUAGES = list(MAN_DIRS)
# missed decidable repairs, and refusals of a repairable place under a holding hint
MAX_MISSED_SHARE = 0.005

Corpus = tuple[Selection, list[Quote]]
Sweeper = Callable[[str, bool], Figures]


@pytest.fixture(scope="module", params=LANGUAGES)
def corpus(request: pytest.FixtureRequest) -> tuple[str, Corpus]:
    if shutil.which("groff") is None:
        pytest.fail("groff is needed to render the man pages: apt-get install groff-base")
    language: str = request.param
    selection = select_pages(language)
    return language, (selection, quotes(language, selection.pages))


@pytest.fixture(scope="module")
def swept() -> dict[tuple[str, str, bool], Figures]:
    """Figures of the sweeps already run, shared by the tests that need the same one."""
    return {}


@pytest.fixture
def run(
    corpus: tuple[str, Corpus],
    swept: dict[tuple[str, str, bool], Figures],
    tmp_path_factory: pytest.TempPathFactory,
) -> Sweeper:
    language, (selection, chosen) = corpus

    def sweep_once(change: str, hinted: bool) -> Figures:
        key = (language, change, hinted)
        if key not in swept:
            directory = tmp_path_factory.mktemp(f"{language}-{change}-{hinted}")
            chunks = chunk_file_records(selection.pages, change)
            citations = [q.record(hinted=hinted) for q in chosen]
            verdicts = sweep(directory, chunks, citations)
            swept[key] = tally(language, change, hinted, chosen, verdicts)
            print(swept[key].line())
        return swept[key]

    return sweep_once


def test_both_renderings_of_most_pages_hold_the_same_characters(
    corpus: tuple[str, Corpus],
) -> None:
    language, (selection, chosen) = corpus
    kept = len(selection.pages)
    print(f"{language}: {kept} pages kept, {selection.dropped} dropped, {len(chosen)} citations")
    assert kept == PAGES, f"{language}: only {kept} usable pages"
    assert selection.dropped <= kept // 5, f"{language}: {selection.dropped} pages dropped"
    assert sum(not q.decidable for q in chosen) >= 15, "too few repeated sentences to test"


@pytest.mark.parametrize("hinted", [False, True], ids=["plain", "hinted"])
def test_an_unchanged_store_raises_no_alarm(
    corpus: tuple[str, Corpus], run: Sweeper, hinted: bool
) -> None:
    figures = run("none", hinted)
    assert figures.drifted == 0 and not figures.false_alarms, figures.line()
    assert figures.repaired == 0, figures.line()


@pytest.mark.parametrize("change", ["resize", "reextract"])
def test_drift_is_repaired_right_or_refused(
    corpus: tuple[str, Corpus], run: Sweeper, change: str
) -> None:
    figures = run(change, False)
    assert figures.drifted > 0 and figures.repaired > 0, figures.line()
    # a repair counts as right only at the true place; surrounding whitespace is trimmed
    # before comparing, though the relocator has not been seen to include any
    assert not figures.wrong, f"wrong repairs {figures.wrong[:5]}: {figures.line()}"
    assert not figures.wrong_shift, f"wrong shifts {figures.wrong_shift[:5]}: {figures.line()}"
    assert not figures.false_alarms, f"false alarms {figures.false_alarms[:5]}: {figures.line()}"
    assert len(figures.missed) <= MAX_MISSED_SHARE * figures.decidable, (
        f"missed {figures.missed[:5]}: {figures.line()}"
    )
    assert figures.ok_moved_share <= MAX_MISSED_SHARE, (
        f"passed as ok {figures.ok_moved[:5]}: {figures.line()}"
    )


@pytest.mark.parametrize("change", MOVING_REWRITES)
def test_a_shift_of_a_few_characters_is_drift_repaired_at_the_true_shift(
    corpus: tuple[str, Corpus], run: Sweeper, change: str
) -> None:
    """Issue 22: a prefix before every chunk's text, CR LF, tabs, stripped trailing spaces.

    Before, the similarity line passed most of these spans as ok (96% at one character of
    prefix), and the shift histogram missed the one cluster that names the cause."""
    figures = run(change, False)
    assert figures.moved > 0, figures.line()
    assert figures.ok_moved_share <= MAX_MISSED_SHARE, (
        f"passed as ok {figures.ok_moved[:5]}: {figures.line()}"
    )
    assert not figures.wrong, f"wrong repairs {figures.wrong[:5]}: {figures.line()}"
    assert not figures.wrong_shift, f"wrong shifts {figures.wrong_shift[:5]}: {figures.line()}"
    assert not figures.false_alarms, f"false alarms {figures.false_alarms[:5]}: {figures.line()}"
    assert len(figures.missed) <= MAX_MISSED_SHARE * figures.decidable, (
        f"missed {figures.missed[:5]}: {figures.line()}"
    )


@pytest.mark.parametrize("change", TYPOGRAPHY_REWRITES)
def test_a_same_length_typography_change_moves_nothing(
    corpus: tuple[str, Corpus], run: Sweeper, change: str
) -> None:
    figures = run(change, False)
    assert figures.moved == 0 and figures.drifted == 0, figures.line()
    assert not figures.false_alarms, f"false alarms {figures.false_alarms[:5]}: {figures.line()}"


@pytest.mark.parametrize("change", ["resize", "reextract"])
def test_position_hints_decide_only_where_they_hold(
    corpus: tuple[str, Corpus], run: Sweeper, change: str
) -> None:
    """Separate from the rest: ``doc_span`` and ``repair.how`` are new to the contract.

    After a chunk-size change the hint tells repeated sentences apart; after a re-extraction,
    which moves them, it must never pick a wrong copy, nor make the relocator refuse more."""
    plain = run(change, False)
    hinted = run(change, True)
    assert not hinted.wrong, f"wrong repairs {hinted.wrong[:5]}: {hinted.line()}"
    assert not hinted.false_alarms, hinted.line()
    if change == "resize":
        assert hinted.refused <= MAX_MISSED_SHARE * hinted.repairable, hinted.line()
        # every repair that only the hint could decide says so
        assert hinted.by_hint == hinted.repaired - plain.repaired > 0, hinted.line()
    else:
        assert hinted.refused <= plain.refused, hinted.line()
        assert hinted.repaired >= plain.repaired, hinted.line()


def test_a_copy_moved_onto_the_hinted_offsets_is_not_taken_for_the_quote(
    tmp_path: Path,
) -> None:
    """Exactness at the hinted offsets does not prove the copy is the one cited.

    In ja/setfacl.1 "このオプションは `--restore' と併用できない。" closes the paragraphs of -R,
    -L and -P. Rendered at 100 columns instead of 80, the -R copy is rewrapped, and the -L copy
    lands on the very offsets the -R copy had, byte for byte: a hint that "holds" there points
    at the wrong option. Found by sweeping 155 Japanese pages (not among the first 40).
    """
    page = load_page("ja", "setfacl.1")
    if page is None:
        pytest.skip("ja/setfacl.1 is not installed, or renders differently at 80 and 100")
    repeated = [q for q in quotes("ja", [page], sampled=0) if not q.decidable]
    assert repeated
    verdicts = sweep(
        tmp_path,
        chunk_file_records([page], "reextract"),
        [q.record(hinted=True) for q in repeated],
    )
    figures = tally("ja", "reextract", True, repeated, verdicts)
    print(figures.line())
    assert not figures.wrong, f"wrong repairs {figures.wrong}: {figures.line()}"


# --- Japanese text without spaces, directly -------------------------------------------------

# 66 characters: one changed character still scores above the threshold of 98
JAPANESE = (
    "このオプションを指定すると、各ファイルの内容を標準出力へ書き出す前に、"
    "すべての行の先頭に行番号を付け、１２３行ごとに空行を挟みます。"
)
OTHER = "オプションを指定しない場合は、標準入力から読み込んだ内容をそのまま出力します。"


def _view(text: str) -> DocumentView:
    store = ChunkStore()
    record = {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0", "text": text}
    store.apply(decode_chunk(record | {"ordinal": 0, "doc_offset": 0}))
    view = store.document("d")
    assert view is not None
    return view


def _found(quote: str, document: str) -> tuple[str, str | None, str | None]:
    """(outcome, text at the place found, method)."""
    view = _view(OTHER + document + OTHER)
    found = relocate(FoldedQuote(quote), view, threshold=98.0)
    if found.place is None:
        return found.outcome, None, None
    return found.outcome, view.text[found.place.start : found.place.end], found.place.method


def test_full_width_digits_are_numbers() -> None:
    assert FoldedQuote(JAPANESE).facts[0] == ("123",)


def test_japanese_quote_with_one_character_changed_is_found_fuzzily() -> None:
    edited = JAPANESE.replace("空行", "改行")
    assert _found(JAPANESE, edited) == (FOUND, edited, "fuzzy")


def test_japanese_quote_with_another_number_is_not_found() -> None:
    edited = JAPANESE.replace("１２３", "１２４")  # noqa: RUF001 (full-width digits)
    assert _found(JAPANESE, edited) == (NOT_FOUND, None, None)


def test_japanese_quote_with_a_negating_prefix_is_not_found() -> None:
    """可能 "possible" and 不可能 "impossible" differ by one character, well within 98."""
    possible = JAPANESE.replace("挟みます。", "挟むことも可能です。")
    assert _found(possible, possible.replace("可能", "不可能")) == (NOT_FOUND, None, None)


def test_a_line_break_inside_a_japanese_sentence_folds_away() -> None:
    """groff and extractors break Japanese lines between any two characters: the rewrapped
    sentence is the same text, found as such even when too short for the approximate search."""
    short = "ディレクトリの内容を一覧表示する。"
    for quote in (short, JAPANESE):
        wrapped = quote.replace("内容", "内容\n       ")
        assert _found(quote, "\n" + wrapped + "\n") == (FOUND, wrapped, "normalised")


# Issue 23's promise on real text: restructuring changes no verdict. The digests in
# tests/data/golden.json are kept per corpus (a digest of its chunks and citations), since the
# pages depend on the man pages installed; tests/test_golden.py records them.
@pytest.mark.parametrize("change", ["resize", "reextract", "prefix3", "crlf", "nbsp"])
def test_the_verdicts_on_real_text_are_what_they_were(
    corpus: tuple[str, Corpus], tmp_path: Path, change: str
) -> None:
    language, (selection, chosen) = corpus
    chunks = chunk_file_records(selection.pages, change)
    citations = [q.record(hinted=True) for q in chosen]
    inputs = hashlib.sha256(orjson.dumps([chunks, citations])).hexdigest()[:16]
    verdicts = sweep(tmp_path, chunks, citations)
    name = f"corpus {language} {change} {inputs}"
    digest = hashlib.sha256(orjson.dumps(verdicts)).hexdigest()
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    if os.environ.get("CITATION_GOLDEN_UPDATE") == "1":
        recorded[name] = digest
        GOLDEN.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    if name not in recorded:
        pytest.skip(f"{language}: these man pages differ from those the digests were taken on")
    assert recorded[name] == digest, f"{name}: the verdicts changed"


# --- capture (issue 27): citations written by exporter.capture, not by hand ----------------------


def _captured_events(chosen: list[Quote]) -> tuple[list[dict[str, Any]], list[Quote]]:
    """Each cited sentence as Anthropic's char_location cites it, captured against the chunk
    that held it; the quotes relabelled with the citation ids capture wrote."""
    events, relabelled = [], []
    prints: dict[str, str] = {}
    for quote in chosen:
        page, cut = quote.page, quote.chunk
        chunk = Chunk(doc_id=page.doc_id, doc_version="v1", chunk_id=f"{page.doc_id}#{cut.ordinal}",
                      text=cut.text, doc_offset=cut.doc_offset)  # fmt: skip
        if page.doc_id not in prints:
            prints[page.doc_id] = document_fingerprint(page.before)
        citation = {"type": "char_location", "document_index": 0, "cited_text": quote.text,
                    "start_char_index": quote.start - cut.doc_offset,
                    "end_char_index": quote.end - cut.doc_offset}  # fmt: skip
        message = {"content": [{"type": "text", "text": "As the manual says.",
                                "citations": [citation]}]}  # fmt: skip
        answer_id = f"ans-{quote.citation_id}"
        captured = from_anthropic(
            message, [chunk], answer_id=answer_id, fingerprints={page.doc_id: prints[page.doc_id]}
        )
        assert captured.refusals == () and captured.event is not None, captured.refusals
        events.append(captured.event)
        relabelled.append(replace(quote, citation_id=f"{answer_id}#0"))
    return events, relabelled


@pytest.mark.parametrize("change", ["none", "resize", "reextract"])
def test_captured_citations_round_trip_and_repeated_quotes_are_decided_by_their_hints(
    corpus: tuple[str, Corpus], run: Sweeper, change: str, tmp_path: Path
) -> None:
    """Captured against the store, swept against it: every citation ok. After a chunk-size
    change every citation is repaired to its true place where one chunk holds it, repeated
    sentences too, told apart by the prefix, suffix and doc_span the capture wrote; after a
    re-extraction no hint picks a wrong copy."""
    language, (selection, chosen) = corpus
    events, relabelled = _captured_events(chosen)
    verdicts = sweep(tmp_path, chunk_file_records(selection.pages, change), events)
    figures = tally(language, change, True, relabelled, verdicts)
    print("captured", figures.line())
    assert not figures.wrong and not figures.wrong_shift, figures.line()
    assert not figures.false_alarms, figures.line()
    if change == "none":
        assert {v["status"] for v in verdicts} == {"ok"}, figures.line()
        return
    by_hand = run(change, True)
    assert figures.repaired >= by_hand.repaired, f"{figures.line()}\n{by_hand.line()}"
    if change == "resize":
        assert figures.refused == 0, figures.line()
        assert figures.repaired == figures.repairable > 0, figures.line()
        repeated = [q for q in relabelled if not q.decidable]
        decided = {v["citation_id"] for v in verdicts if v["status"] == "drift_repaired"}
        assert sum(q.citation_id in decided for q in repeated) >= 15, figures.line()
