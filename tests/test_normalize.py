"""Folding: what a re-extraction changes must vanish, what a sentence says must not."""

from __future__ import annotations

import itertools
import re
import tracemalloc

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from exporter.checks.normalize import (
    _IRREGULAR,
    FoldedText,
    _fold_unit,
    fold,
    fold_with_map,
    folded_part,
    refold,
)

# Characters that exercise every folding rule, plus ordinary text.
_INTERESTING = (
    "ab AZ09.,;\"'-\n\t  "
    "\u00a0\u2009\u3000"  # non-breaking and other spaces
    "\u00ad\u200b\u200d\ufeff"  # soft hyphen, zero-width
    "\u2010\u2013\u2014\u2212"  # hyphen and dashes
    "\u2018\u2019\u201c\u201d\u00ab"  # quotes
    "\ufb01\ufb02\uff21\u2026"  # ligatures, full-width A, ellipsis
    "e\u0301\u00e9\u00c5"  # combining and precomposed
    "日本語。ア"  # CJK: no spaces between words
)
curated_text = st.text(alphabet=st.sampled_from(_INTERESTING), max_size=40)
any_text = curated_text | st.text(max_size=30)


@pytest.mark.parametrize(
    ("raw", "folded"),
    [
        pytest.param("exam-\nple", "example", id="hyphen broken across a line"),
        pytest.param("exam-  \n   ple", "example", id="hyphen break with spaces"),
        pytest.param("co\u00adoper\u00adation", "cooperation", id="soft hyphens"),
        pytest.param("zero\u200bwidth", "zerowidth", id="zero-width space"),
        pytest.param("30\u00a0days", "30 days", id="non-breaking space"),
        pytest.param("a  \n\t b", "a b", id="whitespace run"),
        pytest.param("\u201cquoted\u201d \u2018x\u2019", "\"quoted\" 'x'", id="curly quotes"),
        pytest.param("10\u201320", "10-20", id="en dash"),
        pytest.param("yes \u2014 no", "yes - no", id="spaced em dash"),
        pytest.param("yes -- no", "yes - no", id="double hyphen"),
        pytest.param("\ufb01ne \ufb02ow", "fine flow", id="ligatures"),
        pytest.param("\uff21\uff22", "AB", id="full-width letters"),
        pytest.param("e\u0301t\u00e9", "\u00e9t\u00e9", id="combining mark composed"),
        pytest.param("wait\u2026", "wait...", id="ellipsis"),
        pytest.param("well-known", "wellknown", id="compound hyphen folds like a broken one"),
        pytest.param("COVID-19 and 3-5", "COVID-19 and 3-5", id="hyphen next to digits kept"),
        pytest.param("not 30", "not 30", id="plain text untouched"),
        pytest.param("日本語の\nテキスト", "日本語のテキスト", id="line break inside Japanese"),
        pytest.param("削除する。 デフォルト", "削除する。デフォルト", id="space between CJK"),
        pytest.param("東京\u3000大阪", "東京大阪", id="ideographic space between CJK"),
        pytest.param("ls - ディレクトリ", "ls - ディレクトリ", id="space next to Latin kept"),
        pytest.param("ｶﾀｶﾅ\nの", "カタカナの", id="half-width katakana"),
        pytest.param("no-\n を付ければ", "no- を付ければ", id="no hyphen join into Japanese"),
        pytest.param("此选项\uff0c\n请重新启动。", "此选项,请重新启动。", id="Chinese comma"),
        pytest.param("\U00020b9f \n漢", "\U00020b9f漢", id="CJK extension B"),
        pytest.param("テスト-\nfoo", "テスト- foo", id="no hyphen join out of Japanese"),
        pytest.param("\uff11\uff12\uff13 日", "123 日", id="full-width digits are not CJK"),
    ],
)
def test_fold_examples(raw: str, folded: str) -> None:
    assert fold(raw) == folded
    assert fold_with_map(raw).text == folded


def test_fold_keeps_case_and_digits() -> None:
    assert fold("Refunds within 30 days are NOT issued") == "Refunds within 30 days are NOT issued"


@given(any_text)
def test_fold_and_fold_with_map_agree(text: str) -> None:
    assert fold_with_map(text).text == fold(text)


# Every ASCII character a rule reads (whitespace str.isspace counts, \x1c-\x1f included), and
# letters, digits and dashes for joins and runs.
_ASCII_RULES = st.text(alphabet=st.sampled_from("aZ0.- \n\t\r\x0b\x0c\x1c\x1d\x1e\x1f"))


@given(_ASCII_RULES)
def test_the_ascii_fast_path_folds_as_the_general_rules_do(text: str) -> None:
    # fold() takes str methods and literal-led expressions for ASCII text; the one definition
    # of folding is the general expression, which must agree on every ASCII text
    assert fold(text) == _IRREGULAR.sub(_fold_unit, text)
    assert fold_with_map(text).text == _IRREGULAR.sub(_fold_unit, text)
    # and past the length where whitespace is folded by an expression instead of split
    long = (text + "a") * (5000 // (len(text) + 1) + 1)
    assert fold(long) == _IRREGULAR.sub(_fold_unit, long)


# ASCII beside the typography fold() translates to ASCII first, and beside characters it does
# not (an invisible one, a combining mark, an accented letter, a Japanese one, the full-width
# hyphen), which must take the general expression
_NON_ASCII = (
    "\u00a0\u2009\u202f\u2018\u2019\u201a\u201b\u2032\u00b4\u201c\u201d\u201e\u201f"
    "\u2033\u00ab\u00bb\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63"
    "\ufb00\ufb01\ufb02\ufb03\ufb04\u2026"
    "\u00ad\u200b\u0301\u00e9\u3042\uff0d"
)
# a letter, a space, a line break and a hyphen, with a few of the others at a time, so that
# the rare neighbourhoods a rule reads ("a", a soft hyphen, a line break, "a") come up often
_TYPOGRAPHY_RULES = st.lists(
    st.sampled_from(_NON_ASCII), min_size=1, max_size=3, unique=True
).flatmap(lambda chars: st.text(alphabet=st.sampled_from("a \n-" + "".join(chars)), max_size=12))


@settings(max_examples=1000)
@given(_TYPOGRAPHY_RULES)
def test_common_typography_folds_as_the_general_rules_do(text: str) -> None:
    assert fold(text) == _IRREGULAR.sub(_fold_unit, text)
    assert fold_with_map(text).text == fold(text)


def test_common_typography_folds_as_the_general_rules_do_in_every_short_neighbourhood() -> None:
    # a rule reads a letter, a run and a letter around a place: every text of up to five
    # characters over a letter, a space, a line break, a hyphen and one of the characters, and
    # of up to three over those and two of them, folds as the general expression folds it
    # (random texts rarely hold "a", a soft hyphen, a line break, "a", which a soft hyphen
    # deleted first would fold to "a a", not "aa")
    texts = [
        "".join(chars)
        for one in _NON_ASCII
        for length in range(1, 6)
        for chars in itertools.product("a -\n" + one, repeat=length)
    ]
    texts += [
        "".join(chars)
        for first, second in itertools.combinations(_NON_ASCII, 2)
        for length in range(2, 4)
        for chars in itertools.product("a -\n" + first + second, repeat=length)
    ]
    wrong = [text for text in texts if fold(text) != _IRREGULAR.sub(_fold_unit, text)]
    assert not wrong, f"{len(wrong)} texts fold otherwise, such as {wrong[:3]!r}"


def test_typography_dense_text_folds_without_an_object_per_character() -> None:
    # the fast path translates a text of thousands of dashes or no-break spaces to ASCII; a
    # list of its non-ASCII characters made one string object each (345 KB for 4,096 dashes)
    for text in ("a" + "\u2014" * 4094 + "b", "\u00a0\u2009\u202f" * 1365, "\u200b" * 4096):
        tracemalloc.start()
        folded = fold(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert folded == _IRREGULAR.sub(_fold_unit, text)
        assert peak < 64 * 1024, f"{peak:,} bytes to fold {len(text):,} characters"


def test_a_long_ascii_text_folds_its_spaces_without_a_list_of_its_words() -> None:
    # split and join would hold every word: 22 bytes per character of "ab ab ab ..."; past
    # the split's bound, a text of single spaces costs about its folded copy
    text = "ab " * 350_000
    tracemalloc.start()
    try:
        folded = fold(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert folded == text
    assert peak < 2 * len(text)


@given(any_text)
def test_every_folded_character_maps_into_the_raw_text(text: str) -> None:
    folded = fold_with_map(text)
    previous_start = 0
    for at in range(len(folded.text)):
        start, end = folded.to_raw(at, at + 1)
        assert 0 <= start < end <= len(text)
        assert start >= previous_start, "the map must be monotonic"
        previous_start = start


@given(any_text, st.data())
def test_spans_map_to_raw_spans_that_contain_their_parts(text: str, data: st.DataObject) -> None:
    folded = fold_with_map(text)
    assume(folded.text)
    a = data.draw(st.integers(0, len(folded.text) - 1))
    b = data.draw(st.integers(a + 1, len(folded.text)))
    start, end = folded.to_raw(a, b)
    assert (start, end) == (folded.to_raw(a, a + 1)[0], folded.to_raw(b - 1, b)[1])


_WORD = re.compile(r"\S+")


@given(curated_text)
def test_words_round_trip_through_the_map(text: str) -> None:
    """The raw span a folded word maps back to folds to exactly that word (with its edges)."""
    folded = fold_with_map(text)
    for word in _WORD.finditer(folded.text):
        start, end = folded.to_raw(word.start(), word.end())
        assert fold(text[start:end]).strip() == word.group()


@given(curated_text)
def test_fold_is_idempotent(text: str) -> None:
    """(Spacing diacritics such as U+00A8, whose compatibility form starts with a space, are
    left out: they fold to a space plus a combining mark, which composes on a second pass.)"""
    assert fold(fold(text)) == fold(text)


_words = st.lists(
    st.sampled_from(
        [
            "refund",
            "within",
            "30",
            "days",
            "not",
            "certificate",
            "official",
            "fi",
            "don't",
            '"Pro"',
            "--",
            "5.5",
            "identification",
            "the",
            "a",
        ]
    ),
    min_size=1,
    max_size=25,
)


def _retypeset(words: list[str], choices: list[int]) -> str:
    """Render words the way another extractor might: same words, other typography."""
    out = []
    for i, word in enumerate(words):
        pick = choices[i % len(choices)]
        typeset = (
            word.replace("--", "\u2014")
            .replace("'", "\u2019")
            .replace("fi", "\ufb01" if pick % 2 else "fi")
        )
        if typeset.startswith('"'):
            typeset = "\u201c" + typeset[1:-1] + "\u201d"
        if typeset.isalpha() and len(typeset) > 6 and pick % 3 == 0:
            middle = len(typeset) // 2
            typeset = typeset[:middle] + ("\u00ad" if pick % 2 else "-\n") + typeset[middle:]
        if i:
            out.append(("\n", "\u00a0", "  ", " \n ", " ")[pick % 5])
        out.append(typeset)
    return "".join(out)


@given(_words, st.lists(st.integers(0, 29), min_size=1, max_size=8))
def test_retypesetting_does_not_change_the_folded_text(
    words: list[str], choices: list[int]
) -> None:
    assert fold(_retypeset(words, choices)) == fold(" ".join(words))


@given(st.text(alphabet=st.sampled_from(_INTERESTING), max_size=40))
def test_folding_never_changes_ascii_digits_or_negations(text: str) -> None:
    """(Compatibility digits such as superscripts do fold into ASCII digits; not drawn here.)"""
    folded = fold(text)
    assert [c for c in folded if c in "0123456789"] == [c for c in text if c in "0123456789"]
    if re.search(r"\bnot\b", text):
        assert re.search(r"\bnot\b", folded)


def test_to_raw_rejects_spans_outside_the_text() -> None:
    folded = fold_with_map("abc")
    with pytest.raises(ValueError, match="not inside"):
        folded.to_raw(2, 5)
    with pytest.raises(ValueError, match="not inside"):
        folded.to_raw(1, 1)


def test_map_of_a_hyphen_break_covers_the_break() -> None:
    text = "an exam-\nple here"
    folded = fold_with_map(text)
    at = folded.text.index("example")
    start, end = folded.to_raw(at, at + len("example"))
    assert text[start:end] == "exam-\nple"


def _pieces(folded: FoldedText) -> list[tuple[int, int, int, bool]]:
    """The offset map as (folded start, raw start, raw end, linear), contiguous linear merged."""
    pieces: list[tuple[int, int, int, bool]] = []
    for piece in zip(
        folded._folded_starts,
        folded._raw_starts,
        folded._raw_ends,
        (bool(flag) for flag in folded._linear),
        strict=True,
    ):
        if pieces:
            f, start, end, linear = pieces[-1]
            if linear and piece[3] and end == piece[1] and f + end - start == piece[0]:
                pieces[-1] = (f, start, piece[2], True)
                continue
        pieces.append(piece)
    return pieces


@given(any_text, any_text, st.integers(0, 40), st.integers(0, 40), st.integers(0, 3))
def test_refolding_a_changed_text_equals_folding_it_from_scratch(
    base: str, inserted: str, at: int, removed: int, copies: int
) -> None:
    """A chunk update re-folds only what changed; the result must not differ in any way."""
    base = base * (copies + 1)
    at = min(at, len(base))
    changed = base[:at] + inserted + base[at + removed :]
    expected = fold_with_map(changed)
    refolded = refold(fold_with_map(base), base, changed)
    assert refolded.text == expected.text
    assert refolded.raw_length == expected.raw_length
    assert _pieces(refolded) == _pieces(expected)


def test_a_long_document_is_refolded_around_the_change_only() -> None:
    words = "the \u201crefund\u201d policy applies \ufb01rst to every plan within 30 days "
    before = words * 20_000
    after = before[:600_000] + "a changed sentence \u2014 with a dash " + before[600_010:]
    refolded = refold(fold_with_map(before), before, after)
    assert refolded.text == fold(after)
    assert _pieces(refolded) == _pieces(fold_with_map(after))


@given(st.text(alphabet="ab -\n\t\r\x0b\x0c.'\"", max_size=24))
def test_an_ascii_text_that_folds_to_its_own_length_folds_offset_for_offset(text: str) -> None:
    # the near-span search skips the offset map on such a window (exporter.checks.nearby)
    assume(len(fold(text)) == len(text))
    mapped = fold_with_map(text)
    for start in range(len(text)):
        for end in range(start + 1, len(text) + 1):
            assert mapped.to_raw(start, end) == (start, end)


@given(any_text, any_text, any_text)
def test_a_part_that_folds_apart_is_a_slice_of_the_whole_fold_with_the_same_map(
    before: str, middle: str, after: str
) -> None:
    """The near-span search reads a window of its document's fold instead of folding the window
    (exporter.checks.nearby): only right if the window's fold and its map back are the ones
    folding the window alone gives, wherever folded_part says it can."""
    text = before + middle + after
    start, end = len(before), len(before) + len(middle)
    whole = fold_with_map(text)
    part = folded_part(whole, text, start, end)
    if part is None:
        return
    alone = fold_with_map(middle)
    assert whole.text[part[0] : part[1]] == alone.text == fold(middle)
    for at in range(len(alone.text)):
        for stop in range(at + 1, len(alone.text) + 1):
            raw = whole.to_raw(part[0] + at, part[0] + stop)
            expected = alone.to_raw(at, stop)
            assert (raw[0] - start, raw[1] - start) == expected


def test_a_part_is_refused_where_a_unit_crosses_its_ends() -> None:
    text = "the exam-\nple here and  spaced"
    whole = fold_with_map(text)
    assert folded_part(whole, text, 0, text.index("\n")) is None  # inside a hyphenated break
    assert folded_part(whole, text, 0, text.index("  ") + 1) is None  # inside a run of spaces
    assert folded_part(whole, text, 0, 3) is None  # beside a space, which folds with its run
    assert folded_part(whole, text, 0, 2) == (0, 2)
    assert folded_part(whole, text, 5, len(text)) == (5, len(whole.text))
    assert folded_part(whole, text + "x", 0, 3) is None  # not the text folded
