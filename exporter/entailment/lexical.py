"""The lexical entailment judge: plain disagreements between a claim and its evidence, offline.

A citation's evidence (the live text at its span) can sit exactly where it was recorded and still
not support the sentence it is attached to: "refunds within 60 days" cited to "refunds within 30
days". This judge runs first in every mode, in microseconds, and settles only what plain reading
settles, so the model-backed judge is asked only what it cannot:

* **A quantity the evidence gives differently**: an amount, percentage, duration, date, time of
  day, year, phone number or count ("10 seats") in the claim whose number appears *nowhere* in
  the evidence, while the evidence does state that kind of quantity (same currency, same unit
  family, same counted noun) with another value. Both sides are read after folding
  (:func:`exporter.checks.normalize.fold`), with number words as digits ("five" / "5"), the
  forms of a unit merged ("30-day" / "30 days", "$1,200" / "1200 USD") and exact conversions
  made ("two weeks" / "14 days", "48 hours" / "2 days", "1 year" / "12 months"). Conversions that
  are not exact ("a month" / "30 days", business days / calendar days) compare nothing.
* **A negation on one side only**: a clause of the claim and a clause of the evidence that share
  nearly all their words, one negated ("not", "n't", "no", "never", "cannot") and the other not.

Anything else is ``unknown``: a faithful paraphrase looks, to a word-level reader, much like an
unfaithful one, and calling a faithful answer unsupported (a *false alarm*) is the failure this
judge is built to avoid. Hence the caution in every rule: a claim's number found in the evidence
where its role is unsure (a count, an identifier, a form not understood; not where it was read as
a date, amount, duration ...) is accounted for; a number in a range the evidence gives ("3-5
days") is too; an approximate claim ("about 10 days") is not compared; identifiers (step, section,
version and order numbers, HTTP codes, list markers) are not compared; an amount the claim could
have computed from the evidence (a monthly price times 12, times a count in the claim, less a
percentage) is accounted for; a clause with a double negation, an exception or a restriction
("unless", "only", "without", "free", "excluded" ...) is not compared for negation, since those
words negate without saying "not".

**It never says entailed, except in one strictly safe case**: the claim's text *is* the
evidence's, after folding, ignoring case, enclosing quotes and final punctuation (and it has at
least three words). Nothing else a word-level reader sees establishes a claim.

**Bounded and total.** Any ``str`` may arrive (empty, megabytes, every script, lone surrogates).
A claim longer than :data:`MAX_CLAIM_CHARS` or evidence longer than :data:`MAX_EVIDENCE_CHARS`
is ``unknown`` without being read; every expression is linear (no nested quantifiers over
overlapping alternatives) and at most :data:`MAX_QUANTITIES` quantities and
:data:`MAX_CLAUSES` clauses are examined per side. A bug is caught and reported as ``unknown``:
:meth:`LexicalJudge.judge` never raises. Reasons are at most :data:`MAX_REASON_CHARS` characters
and built from parsed values, never copied from the input.

The labelled set and its guide are ``tests/data/entailment/``; ``bench/lexical_bench.py``
measures the judge on it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import lru_cache

from exporter.checks.normalize import fold
from exporter.entailment.results import EntailmentResult, Judgement

__all__ = [
    "MAX_CLAIM_CHARS",
    "MAX_CLAUSES",
    "MAX_EVIDENCE_CHARS",
    "MAX_QUANTITIES",
    "MAX_REASON_CHARS",
    "LexicalJudge",
]

#: A longer claim is ``unknown`` unread: an answer sentence is far shorter, and work stays bounded.
MAX_CLAIM_CHARS = 1_000
#: Longer evidence is ``unknown`` unread: a span is a passage (some 1,500 words), not a document.
MAX_EVIDENCE_CHARS = 10_000
#: At most this many quantities are taken from each side.
MAX_QUANTITIES = 200
#: At most this many clauses of each side are compared for negation.
MAX_CLAUSES = 200
#: Reasons are cut to this many characters.
MAX_REASON_CHARS = 120

UNKNOWN, NOT_ENTAILED, ENTAILED = (
    EntailmentResult.UNKNOWN,
    EntailmentResult.NOT_ENTAILED,
    EntailmentResult.ENTAILED,
)


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of a literal: long word lists stay readable."""
    return frozenset(text.split())


# --- text preparation ---------------------------------------------------------------------------

_SMALL = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUE = {word: value for value, word in enumerate(_SMALL)} | {
    word: 20 + 10 * index for index, word in enumerate(_TENS)
}
_MULTIPLIER = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
# "twenty-four" folds to "twentyfour" (a hyphen between letters folds away); "twenty four" too
_WORD_NUMBER = re.compile(
    rf"\b(?:(?P<tens>{'|'.join(_TENS)})(?:[ ]?(?P<unit>{'|'.join(_SMALL[1:10])}))?"
    rf"|(?P<small>{'|'.join(_SMALL)}))"
    rf"(?:[ ](?P<mult>{'|'.join(_MULTIPLIER)}))?\b"
)
_CONTRACTIONS = (
    (re.compile(r"\bcan'?t\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"(?<=[a-z])n't\b"), " not"),
    (re.compile(r"\bno one\b"), "nobody"),
)


def _number_words(match: re.Match[str]) -> str:
    """A number written in words, as digits ("twenty four thousand" -> "24000")."""
    if match["small"]:
        value = _WORD_VALUE[match["small"]]
    else:
        value = _WORD_VALUE[match["tens"]] + (_WORD_VALUE[match["unit"]] if match["unit"] else 0)
    if match["mult"]:
        value *= _MULTIPLIER[match["mult"]]
    return str(value)


def _prepare(text: str) -> str:
    """Folded, lower-cased, contractions spelt out and number words as digits."""
    text = fold(text).lower()
    if "'" in text or "cannot" in text or "no one" in text:
        for pattern, replacement in _CONTRACTIONS:
            text = pattern.sub(replacement, text)
    return _WORD_NUMBER.sub(_number_words, text)


_EQUAL_STRIP = re.compile(r"^[\s\"'*_`>#-]+|[\s\"'*_`.!]+$")
_WORD = re.compile(r"[^\W_]+")


def _same_text(claim: str, evidence: str) -> bool:
    """Whether the claim is the evidence, after folding, ignoring case, enclosing quotes or
    markdown and final punctuation: the one case the lexical judge calls entailed."""
    a = _EQUAL_STRIP.sub("", fold(claim).casefold())
    b = _EQUAL_STRIP.sub("", fold(evidence).casefold())
    return a == b and len(_WORD.findall(a)) >= 3


# --- quantities ---------------------------------------------------------------------------------

_NUM = r"(?<![\w.,/:])(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?![0-9]|[.,:/][0-9])"
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_NAMES = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO_DATE = re.compile(r"\b((?:19|20)[0-9]{2})-([0-9]{1,2})-([0-9]{1,2})\b")
_SLASH_DATE = re.compile(r"\b([0-9]{1,2})/([0-9]{1,2})/((?:19|20)?[0-9]{2})\b")
_PHONE = re.compile(r"\+?(?:\([0-9]{1,4}\)|[0-9]{1,4})(?:[ -](?:\([0-9]{1,4}\)|[0-9]{1,4})){2,5}")
_TIME = re.compile(
    r"\b([0-9]{1,2})(?::([0-9]{2}))?[ ]?([ap])\.?m\b\.?|(?<![0-9:])([0-9]{1,2}):([0-9]{2})\b"
)
_YEAR_AFTER = r"(?:,?[ ]((?:19|20)[0-9]{2})\b)?"
_DAY_MONTH = re.compile(
    rf"\b([0-9]{{1,2}})(?:st|nd|rd|th)?[ ](?:of[ ])?({_MONTH})\b\.?{_YEAR_AFTER}"
)
_MONTH_DAY = re.compile(rf"\b({_MONTH})\b\.?[ ]([0-9]{{1,2}})(?:st|nd|rd|th)?\b{_YEAR_AFTER}")
# numbers that name something rather than measure it: never compared
_IDENTIFIER = re.compile(
    r"(?:\b(?:steps?|sections?|sec|articles?|art|clauses?|chapters?|pages?|parts?|items?|no|"
    r"numbers?|orders?|tickets?|cases?|invoices?|tiers?|levels?|phases?|versions?|windows|ios|"
    r"android|macos|python|node(?:\.js)?|java|php|tls|ssl|http|errors?|codes?|status|ports?|"
    r"iso(?:/iec)?|soc|pci|rfc|models?|sku|id|builds?|releases?|q|rooms?|floors?|lines?|"
    r"options?|extension|ext|press|dial|gen|series|type)[ ]?[#:]?[ ]?|#|\bv)"
    r"[0-9][0-9.]*"
    r"|(?:^|(?<=[.:;!?])[ ]|\n)[ ]*[0-9]{1,2}[.)](?=[ ])"
)
_CURRENCY = {
    "$": "$",
    "us$": "$",
    "usd": "$",
    "dollar": "$",
    "dollars": "$",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "£": "GBP",
    "gbp": "GBP",
    "pound": "GBP",
    "pounds": "GBP",
    "¥": "JPY",
    "jpy": "JPY",
    "chf": "CHF",
    "cad": "CAD",
    "aud": "AUD",
}
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
_AMOUNT = re.compile(
    rf"(?P<c1>us\$|\$|€|£|¥|\b(?:usd|eur|gbp|chf|cad|aud|jpy)\b)[ ]?(?P<n1>{_NUM})"
    r"(?:[ ]?(?P<s1>k|m|bn|million|thousand|billion)\b)?"
    rf"|(?P<n2>{_NUM})(?:[ ]?(?P<s2>k|bn|million|thousand|billion)\b)?[ ]?"
    r"(?P<c2>€|£|\$|\b(?:usd|eur|gbp|chf|cad|aud|jpy|dollars?|euros?|pounds?)\b)"
)
_PERIOD = re.compile(
    r"[ ]?(?:/|\bper\b|\ba\b|\ban\b|\beach\b|\bevery\b)[ ]?"
    r"(?:(?:user|seat|member|person|licen[cs]e)[ ]?(?:/|\bper\b|\ba\b|\beach\b)[ ]?)?"
    r"(?P<p>month|mo|year|yr|annum|week|day)\b"
    r"|[ ](?P<q>monthly|annually|yearly)\b"
)
_PERIOD_NAME = {"mo": "month", "yr": "year", "annum": "year", "monthly": "month"}
_PERIOD_NAME |= {"annually": "year", "yearly": "year"}
_PERCENT = re.compile(rf"(?P<n>{_NUM})[ ]?(?:%|\bpercent\b|\bper[ ]cent\b)")
_DURATION_UNITS = {
    "second": ("time", 1),
    "sec": ("time", 1),
    "minute": ("time", 60),
    "min": ("time", 60),
    "hour": ("time", 3_600),
    "hr": ("time", 3_600),
    "day": ("time", 86_400),
    "week": ("time", 604_800),
    "wk": ("time", 604_800),
    "fortnight": ("time", 1_209_600),
    "month": ("month", 1),
    "year": ("month", 12),
    "yr": ("month", 12),
}
_DURATION = re.compile(
    rf"(?P<n>{_NUM})(?:[ ]?(?:-|to|and|or)[ ]?(?P<m>{_NUM}))?[ ]?-?[ ]?"
    r"(?P<kind>business|working|calendar)?[ ]?"
    r"(?P<u>seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|wks?|fortnights?|months?|"
    r"years?|yrs?)\b"
)
_YEAR = re.compile(r"(?<![\w.,/:$€£¥])((?:19|20)[0-9]{2})(?![\w%€£$]|[.,:/][0-9]|[ ][a-z])")
_YEAR_BEFORE = re.compile(
    r"\b(?:in|since|from|until|till|by|of|before|after|during|for|year|fy|and|to|through)[ ]$"
)
_COUNT = re.compile(
    rf"(?P<n>{_NUM})(?:[ ]?(?:-|to|or)[ ]?(?P<m>{_NUM}))?[ ]?-?[ ]?(?P<w>[a-z]{{2,20}})\b"
)
_NOT_COUNTED = _words(
    """a an the and or to of in on at for by with from per is are was were be been can may
    will must should would could might shall do does did has have had more less than times x
    st nd rd th am pm percent hundred thousand million billion k bn not no never and but if
    as so that which who it its this these those up out over under about after before into
    than then also all any each every other such same own only just both few most some"""
) | frozenset(_MONTHS)
_APPROXIMATE = re.compile(
    r"(?:\babout|\baround|\bapproximately|\bapprox\.?|\broughly|\bnearly|\balmost|\bcirca|"
    r"\bca\.|~|\bsome|\bup[ ]to[ ]about)[ ]?$"
)
_DIGIT = re.compile(r"[0-9]")
_ANY_NUMBER = re.compile(r"[0-9]+(?:[.,][0-9]+)*")
# readings that only ever help a claim's number be found (never make a disagreement)
_WEAK = re.compile(
    r"\bhalf an hour\b|\ba quarter of an hour\b|\b(?:a|an|one|per|each|every)[ ](?P<u>fortnight"
    r"|week|day|hour|minute|month|year)\b|\bfortnight\b|\bhalf\b|\bquarter\b|\bthird\b|"
    r"\bdozen\b|\btwice\b|\bnoon\b|\bmidnight\b"
)


@dataclass(frozen=True, slots=True)
class _Quantity:
    """One quantity of one side: its kind (``dim``), the values that would satisfy it, the
    numeral as written, a label for reasons, and how far to trust it."""

    dim: str
    values: frozenset[float]
    numeral: float
    label: str
    period: str | None = None
    approximate: bool = False
    weak: bool = False
    low: float | None = None
    high: float | None = None


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _plain(value: float) -> str:
    """A value for a reason: no trailing ``.0``."""
    if abs(value) >= 1e15:
        return "a huge number"
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}".rstrip("0")


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


class _Reader:
    """Takes the quantities out of one prepared text, pass by pass, blanking what each pass
    took so that no number is read twice (a date's day is not also a count)."""

    def __init__(self, text: str, *, claim: bool) -> None:
        self.text = text
        self.claim = claim
        self.found: list[_Quantity] = []
        self.overflow = False  # more than MAX_QUANTITIES: the reading is incomplete
        self._original = text
        self._read: list[tuple[int, int]] = []  # spans read as a quantity of a definite kind

    def _take(self, pattern: re.Pattern[str], *, definite: bool = True) -> list[re.Match[str]]:
        matches: list[re.Match[str]] = []

        def blank(match: re.Match[str]) -> str:
            matches.append(match)
            if definite:
                self._read.append(match.span())
            return " " * (match.end() - match.start())

        self.text = pattern.sub(blank, self.text)
        return matches

    def unread(self) -> str:
        """The text without the spans read as a date, time, phone number, amount, percentage,
        duration or year: the numbers left in it (counts, identifiers, numbers in a form not
        understood) are those whose role is unsure."""
        chars = list(self._original)
        for start, end in self._read:
            chars[start:end] = " " * (end - start)
        return "".join(chars)

    def _approximate(self, at: int) -> bool:
        """Whether an approximation ("about", "around", "~") comes just before a claim's number
        (an approximate claim is not compared; the evidence's are read as they are)."""
        return self.claim and _APPROXIMATE.search(self.text, max(0, at - 24), at) is not None

    def _add(self, quantity: _Quantity) -> None:
        if len(self.found) < MAX_QUANTITIES:
            self.found.append(quantity)
        else:
            self.overflow = True

    def read(self) -> list[_Quantity]:
        if _DIGIT.search(self.text) is None:
            return self.found  # every quantity has a digit once number words are digits
        self._dates()
        for match in self._take(_PHONE):
            digits = re.sub(r"[^0-9]", "", match.group())
            if len(digits) >= 7:
                last = float(digits[-7:])
                self._add(_Quantity("phone", frozenset({last}), last, f"phone ...{digits[-7:]}"))
        self._times()
        self._month_dates()
        self._take(_IDENTIFIER, definite=False)
        self._amounts()
        for match in self._take(_PERCENT):
            value = _number(match["n"])
            approx = self._approximate(match.start())
            self._add(
                _Quantity("percent", frozenset({value}), value, f"{_plain(value)}%", None, approx)
            )
        self._durations()
        self._years()
        self._counts()
        return self.found

    def _dates(self) -> None:
        for match in self._take(_ISO_DATE):
            year, month, day = (int(part) for part in match.groups())
            self._date(month, day, year)
        for match in self._take(_SLASH_DATE):
            first, second, year = (int(part) for part in match.groups())
            readings = {m * 100 + d for m, d in ((first, second), (second, first)) if m <= 12}
            if readings:
                label = f"date {match.group()}"
                value = min(readings)
                self._add(_Quantity("date", frozenset(float(r) for r in readings), value, label))
                self._year(year if year > 99 else 2000 + year)

    def _date(self, month: int, day: int, year: int | None) -> None:
        if 1 <= month <= 12 and 1 <= day <= 31:
            label = f"{_MONTH_NAMES[month - 1]} {day}"
            self._add(_Quantity("date", frozenset({month * 100.0 + day}), day, label))
        if year is not None:
            self._year(year)

    def _year(self, year: int) -> None:
        self._add(_Quantity("year", frozenset({float(year)}), year, f"year {year}"))

    def _times(self) -> None:
        for match in self._take(_TIME):
            if match[1] is not None:
                hour, minute = int(match[1]) % 12, int(match[2] or 0)
                hour += 12 if match[3] == "p" else 0
            else:
                hour, minute = int(match[4]), int(match[5])
            if hour < 24 and minute < 60:
                value = hour * 60.0 + minute
                self._add(_Quantity("time", frozenset({value}), value, f"{hour:02d}:{minute:02d}"))

    def _month_dates(self) -> None:
        for pattern, day_group, month_group in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
            for match in self._take(pattern):
                year = int(match[3]) if match[3] else None
                self._date(_MONTHS[match[month_group]], int(match[day_group]), year)

    def _amounts(self) -> None:
        for match in self._take(_AMOUNT):
            numeral = _number(match["n1"] or match["n2"])
            scale = _SCALE.get(match["s1"] or match["s2"] or "", 1.0)
            currency = _CURRENCY[(match["c1"] or match["c2"]).strip()]
            period_match = _PERIOD.match(self.text, match.end())
            period = None
            if period_match is not None:
                word = period_match["p"] or period_match["q"]
                period = _PERIOD_NAME.get(word, word)
            value = numeral * scale
            shown = f"${_plain(value)}" if currency == "$" else f"{_plain(value)} {currency}"
            label = shown + (f"/{period}" if period else "")
            approx = self._approximate(match.start())
            self._add(
                _Quantity(f"amount {currency}", frozenset({value}), numeral, label, period, approx)
            )

    def _durations(self) -> None:
        for match in self._take(_DURATION):
            unit = _singular(match["u"])
            family, factor = _DURATION_UNITS[unit]
            if match["kind"] in ("business", "working"):
                family, factor = f"business {unit}", 1
            approx = self._approximate(match.start())
            numbers = [_number(match["n"])] + ([_number(match["m"])] if match["m"] else [])
            low, high = min(numbers) * factor, max(numbers) * factor
            for numeral in numbers:
                plural = "" if numeral == 1 else "s"
                label = f"{_plain(numeral)} {match['kind'] + ' ' if match['kind'] else ''}{unit}"
                label += plural
                self._add(
                    _Quantity(
                        family,
                        frozenset({numeral * factor}),
                        numeral,
                        label,
                        approximate=approx,
                        low=low,
                        high=high,
                    )
                )

    def _years(self) -> None:
        for match in self._take(_YEAR):
            self._year(int(match[1]))
        # years before a word count as years only after a word that introduces a year
        for match in re.finditer(r"(?<![\w.,/:$€£¥])((?:19|20)[0-9]{2})(?=[ ][a-z])", self.text):
            if _YEAR_BEFORE.search(self.text, max(0, match.start() - 12), match.start()):
                self._year(int(match[1]))

    def _counts(self) -> None:
        for match in _COUNT.finditer(self.text):
            word = match["w"]
            if word in _NOT_COUNTED or _singular(word) in _DURATION_UNITS:
                continue
            noun = _singular(word)
            numbers = [_number(match["n"])] + ([_number(match["m"])] if match["m"] else [])
            approx = self._approximate(match.start())
            for numeral in numbers:
                self._add(
                    _Quantity(
                        f"count {noun}",
                        frozenset({numeral}),
                        numeral,
                        f"{_plain(numeral)} {noun}",
                        approximate=approx,
                        low=min(numbers),
                        high=max(numbers),
                    )
                )


def _weak_readings(text: str) -> tuple[list[_Quantity], set[float]]:
    """Readings of the evidence that can only account for a claim's quantity: "a week" (7 days),
    "half" (50%), "fortnight", "noon", "twice", "a dozen"; and the numbers they stand for."""
    found: list[_Quantity] = []
    numbers: set[float] = set()
    for match in _WEAK.finditer(text):
        word = match.group()
        if match["u"]:
            family, factor = _DURATION_UNITS[match["u"]]
            found.append(_Quantity(family, frozenset({float(factor)}), 1, word, weak=True))
        elif word in ("half an hour", "a quarter of an hour"):
            seconds = 1_800.0 if word.startswith("half") else 900.0
            found.append(_Quantity("time", frozenset({seconds}), 0, word, weak=True))
        elif word == "fortnight":
            found.append(_Quantity("time", frozenset({1_209_600.0}), 2, word, weak=True))
        elif word in ("half", "quarter", "third"):
            share = {"half": 50.0, "quarter": 25.0, "third": 100 / 3}[word]
            found.append(_Quantity("percent", frozenset({share}), share, word, weak=True))
        elif word in ("noon", "midnight"):
            minutes = 720.0 if word == "noon" else 0.0
            found.append(_Quantity("time", frozenset({minutes}), minutes, word, weak=True))
        else:
            numbers.add({"dozen": 12.0, "twice": 2.0}[word])
    return found, numbers


def _all_numbers(text: str) -> set[float] | None:
    """Every number written in the text, read both ways where a comma or point is ambiguous
    ("1,200" as 1200 and 1.2): a claim's number found here is accounted for. None when there
    are too many to hold (text that is mostly numbers)."""
    numbers: set[float] = set()
    for match in _ANY_NUMBER.finditer(text):
        raw = match.group()
        for reading in (raw.replace(",", ""), raw.replace(".", "").replace(",", ".")):
            try:
                numbers.add(float(reading))
            except ValueError:
                continue
        for part in re.split(r"[.,]", raw):
            numbers.add(float(part))
        if len(numbers) > 4 * MAX_QUANTITIES:
            return None
    return numbers


class _Evidence:
    """The evidence's quantities, indexed by kind, and the numbers it writes whose role is
    unsure (a claim number among those is accounted for: it may be the claim's, in a form not
    understood)."""

    def __init__(self, text: str) -> None:
        reader = _Reader(text, claim=False)
        self.quantities = reader.read()
        self.overflow = reader.overflow
        weak, extra = _weak_readings(text)
        self.quantities.extend(weak)
        numbers = _all_numbers(reader.unread())
        self.overflow |= numbers is None
        self.numbers = (numbers or set()) | extra
        self.by_dim: dict[str, list[_Quantity]] = {}
        for quantity in self.quantities:
            self.by_dim.setdefault(quantity.dim, []).append(quantity)
        # percentages the evidence states, and their complements ("20% off" = "pay 80%")
        self.shares = {v for q in self.by_dim.get("percent", []) for v in q.values}
        self.by_dim.setdefault("percent", []).extend(
            _Quantity("percent", frozenset({100 - v}), 100 - v, "", weak=True)
            for v in list(self.shares)
        )


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _matches(quantity: _Quantity, other: _Quantity) -> bool:
    """Whether one stated quantity gives the claim's value (or a range holding it)."""
    if any(_close(a, b) for a in quantity.values for b in other.values):
        return True
    if other.low is not None and other.high is not None:
        return any(other.low <= value <= other.high for value in quantity.values)
    return False


def _computed(
    quantity: _Quantity, other: _Quantity, claim_numbers: set[float], shares: set[float]
) -> float | None:
    """Whether a claim amount is computed from an evidence amount: 0 for a derivation that uses
    no number of the claim, the claim's number used (a count of seats), or None."""
    for value in other.values:
        derived = {value * 12, value / 12}
        derived |= {value * (100 - s) / 100 for s in shares} | {value * s / 100 for s in shares}
        if any(_close(a, b) for a in quantity.values for b in derived):
            return 0.0
        for number in claim_numbers:
            for factor in (1, 12):
                if any(_close(a, value * number * factor) for a in quantity.values):
                    return number
    return None


def _stated(quantity: _Quantity, evidence: _Evidence) -> list[_Quantity]:
    """The evidence's quantities of the claim quantity's kind (amounts: a compatible period)."""
    return [
        other
        for other in evidence.by_dim.get(quantity.dim, [])
        if quantity.period is None or other.period is None or other.period == quantity.period
    ]


def _disagreement(quantity: _Quantity, evidence: _Evidence, accounted: set[float]) -> str | None:
    """How the evidence gives this claim quantity differently, or None when it does not."""
    if quantity.approximate or quantity.numeral in accounted:
        return None
    if quantity.numeral in evidence.numbers or evidence.numbers & set(quantity.values):
        return None
    stated = _stated(quantity, evidence)
    if any(_matches(quantity, other) for other in stated):
        return None
    strong = [other for other in stated if not other.weak and other.label]
    if not strong:
        return None
    given = ", ".join(dict.fromkeys(other.label for other in strong[:3]))
    return f"{quantity.label} vs {given}"


def _quantity_disagreement(claim: str, evidence: str) -> str | None:
    reader = _Reader(claim, claim=True)
    quantities = reader.read()
    claim_numbers = _all_numbers(claim)
    if not quantities or reader.overflow or claim_numbers is None:
        return None  # nothing to compare, or too much to compare honestly
    facts = _Evidence(evidence)
    if facts.overflow:
        return None  # the claim's number may be among those not read: say nothing
    shares = facts.shares | {v for q in quantities if q.dim == "percent" for v in q.values}
    # amounts the claim computed from the evidence's, and the claim's numbers they used
    accounted: set[float] = set()
    for quantity in quantities:
        if quantity.dim.startswith("amount"):
            for other in _stated(quantity, facts):
                used = _computed(quantity, other, claim_numbers, shares)
                if used is not None:
                    accounted |= {quantity.numeral, used}
                    break
    for quantity in quantities:
        reason = _disagreement(quantity, facts, accounted)
        if reason is not None:
            return reason
    return None


# --- negation -----------------------------------------------------------------------------------

_NEGATORS = frozenset({"not", "no", "never"})
# phrases with a negation word that negate nothing in the claim's sense
_NOT_NEGATING = re.compile(
    r"\b(?:not only|not just|whether or not|or not|if not|no later than|not later than|"
    r"no more than|not more than|no less than|not less than|no fewer than|no matter|"
    r"not to mention|no longer than|no sooner than)\b|^(?:no|yes)\b[,.!]?"
)
# words that negate or restrict without saying "not": a clause holding one is not compared
_RESTRICTING = _words(
    """only unless except excluding exclude excludes excluded without free waive waived exempt
    neither nor nothing nobody none nowhere fail fails failed unable impossible prohibited
    forbidden forbid disabled disable deny denied refuse refused decline declined reject
    rejected lack lacks instead rather otherwise optional until if whether unlimited invalid
    ineligible illegal incorrect inactive insufficient immutable nonrefundable"""
)
_UN_WORDS = _words(
    "under understand understood until unit units united universal university unique unix union "
    "unicode uniform update updated upon"
)
_STOPWORDS = _words(
    """a an the and or of in on at for by with from per to is are was were be been being am
    can could may might must shall should will would do does did has have had having it its
    this that these those they them their we our us you your i he she his her there here which
    who whom whose what when where how all any every each some also just up out as than then
    so too very into onto over such own same other another once please"""
)
_CLAUSE_BREAK = re.compile(
    r"[.!?;:](?:\s|$)|\n|,?\s+(?:but|however|whereas|although|though)\b|,\s+(?:and|or|so|while)\b"
)
_TOKEN = re.compile(r"[a-z0-9]+")
_ANY_NEGATOR = re.compile(r"\b(?:not|no|never)\b")
_SUFFIXES = ("ations", "ation", "ings", "ing", "able", "ies", "ied", "ed", "es", "s", "e")


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True, slots=True)
class _Clause:
    content: frozenset[str]
    negator: str | None  # the first negation word, when the clause is negated
    restricted: bool  # holds a restriction or a double negation: not compared


def _clauses(text: str) -> list[_Clause]:
    clauses: list[_Clause] = []
    for part in _CLAUSE_BREAK.split(text, maxsplit=MAX_CLAUSES):
        tokens = _TOKEN.findall(_NOT_NEGATING.sub(" ", part.strip()))
        if not tokens:
            continue
        negators = [t for t in tokens if t in _NEGATORS]
        restricted = any(
            t in _RESTRICTING or (t.startswith(("un", "non")) and len(t) > 5 and t not in _UN_WORDS)
            for t in tokens
        )
        if len(negators) > 1:
            restricted = True  # "not ... never", "no ... not": double negation
        content = frozenset(_stem(t) for t in tokens if t not in _STOPWORDS and t not in _NEGATORS)
        clauses.append(_Clause(content, negators[0] if negators else None, restricted))
    return clauses


def _aligned(claim: _Clause, other: _Clause) -> float:
    """How well two clauses say the same thing, by their content words: 0 unless nearly all
    the claim's are in the other clause and at least half the other's are in the claim."""
    if len(claim.content) < 2 or not other.content:
        return 0.0
    shared = len(claim.content & other.content)
    covered, coverage = shared / len(claim.content), shared / len(other.content)
    if covered < 0.75 or coverage < 0.5:
        return 0.0
    return covered + coverage


def _negation_disagreement(claim: str, evidence: str) -> str | None:
    if _ANY_NEGATOR.search(claim) is None and _ANY_NEGATOR.search(evidence) is None:
        return None  # no negation on either side
    if sorted(_TOKEN.findall(claim)) == sorted(_TOKEN.findall(evidence)):
        return None  # the same words in another order: nothing a word-level reader can oppose
    evidence_clauses = _clauses(evidence)
    for clause in _clauses(claim):
        if clause.restricted:
            continue
        scored = [(_aligned(clause, other), other) for other in evidence_clauses]
        matches = [(score, other) for score, other in scored if score > 0]
        if not matches:
            continue
        if any((other.negator is None) == (clause.negator is None) for _, other in matches):
            continue
        _, best = max(matches, key=lambda pair: pair[0])
        if best.restricted:
            continue
        if clause.negator is not None:
            return f"negation: '{clause.negator}' in the claim only"
        return f"negation: '{best.negator}' in the evidence only"
    return None


# --- the judge ----------------------------------------------------------------------------------


def _decide(claim: str, evidence: str) -> tuple[EntailmentResult, str]:
    if len(claim) > MAX_CLAIM_CHARS:
        return UNKNOWN, f"claim too long to judge ({len(claim):,} characters)"
    if len(evidence) > MAX_EVIDENCE_CHARS:
        return UNKNOWN, f"evidence too long to judge ({len(evidence):,} characters)"
    if _same_text(claim, evidence):
        return ENTAILED, "the evidence is the claim, word for word"
    prepared_claim, prepared_evidence = _prepare(claim), _prepare(evidence)
    reason = _quantity_disagreement(prepared_claim, prepared_evidence)
    if reason is None:
        reason = _negation_disagreement(prepared_claim, prepared_evidence)
    if reason is not None:
        return NOT_ENTAILED, reason
    return UNKNOWN, "no number or negation disagrees"


class LexicalJudge:
    """The offline judge: ``not_entailed`` only on a plain disagreement (a number, amount,
    percentage, date or duration given differently, or a negation on one side only), ``entailed``
    only when the evidence is the claim word for word, else ``unknown``. Pure and stateless:
    one instance may serve every thread."""

    name = "lexical"

    def judge(self, claim: str, evidence: str) -> Judgement:
        """Judge one claim against its evidence; never raises, whatever the two strings hold."""
        started = time.perf_counter()
        try:
            result, reason = _decide(claim, evidence)
        except Exception as error:  # a bug must not stop the check: say unknown, and why
            result, reason = UNKNOWN, f"lexical judge failed: {type(error).__name__}"
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[: MAX_REASON_CHARS - 3] + "..."
        return Judgement(result, self.name, reason, seconds=time.perf_counter() - started)
