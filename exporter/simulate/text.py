"""Synthetic documents that read like product documentation, and two ways to extract them.

A document is kept as paragraphs of sentences of words, so it can be *rendered* twice: once as
the original extractor did (plain ASCII punctuation, lines wrapped at 80 columns) and once as a
new extractor would (curly quotes, em dashes, ligatures, non-breaking spaces after numbers, soft
hyphens, words hyphenated at line ends, another wrap width). The words never change between the
two, and each rendering records where every sentence starts and ends, which is the ground truth
the scenario's expected verdicts are computed from.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["BOILERPLATE", "Document", "Rendering", "Style", "make_document", "make_sentence"]

BOILERPLATE = (
    "Refunds are issued to the original cards.",
    'See the "Limits" page for the current values.',
    "This setting can't be changed after the workspace is created.",
)

_PLANS = ("Starter", "Team", "Business", "Enterprise", "Pro", "Scale")
_SUBJECTS = (
    "Customers",
    "Workspace owners",
    "Administrators",
    "Billing contacts",
    "API clients",
    "Service accounts",
    "Guest users",
    "Support engineers",
    "Regional tenants",
    "Trial accounts",
)
_VERBS = (
    "can export",
    "may request",
    "are allowed to store",
    "can invite",
    "receive",
    "are billed for",
    "can restore",
    "may archive",
    "can schedule",
    "are limited to",
)
_OBJECTS = (
    "audit logs",
    "backup snapshots",
    "seats",
    "API requests",
    "data exports",
    "custom domains",
    "webhook endpoints",
    "retention policies",
    "encryption keys",
    "sandbox environments",
)
_UNITS = ("days", "hours", "requests", "gigabytes", "seats", "minutes", "projects", "regions")
_PERIODS = ("per month", "per day", "per billing cycle", "per workspace", "per region", "per hour")
_CLAUSES = (
    "unless the contract says otherwise",
    "after the identification process is complete",
    "without prior notification of the affected users",
    "once the confirmation email is accepted",
    "if the certificate is not renewed in time",
    "when the fiscal quarter closes",
    "as defined in the official specification",
    "subject to the fair-use policy",
    "for the benefit of the whole organisation",
    "except during scheduled maintenance windows",
)
_NOTES = (
    "Refunds are never issued for partial months.",
    "The dashboard shows the figures -- refreshed every few minutes.",
    'Requests marked as "urgent" are handled first.',
    "Older snapshots aren't deleted automatically.",
    "Notifications are sent to the primary contact only.",
    "Exports include metadata... but not attachments.",
)


def make_sentence(rng: random.Random) -> list[str]:
    """One sentence as a list of words (punctuation attached), ASCII only."""
    kind = rng.random()
    if kind < 0.45:
        words = (
            f"{rng.choice(_SUBJECTS)} on the {rng.choice(_PLANS)} plan {rng.choice(_VERBS)} "
            f"up to {rng.randint(2, 5000)} {rng.choice(_UNITS)} {rng.choice(_PERIODS)}, "
            f"{rng.choice(_CLAUSES)}."
        )
    elif kind < 0.75:
        negation = rng.choice(("not", "never", "no longer"))
        words = (
            f"{rng.choice(_OBJECTS).capitalize()} are {negation} kept for more than "
            f"{rng.randint(1, 400)} {rng.choice(_UNITS)} {rng.choice(_CLAUSES)}."
        )
    elif kind < 0.9:
        words = (
            f'The "{rng.choice(_PLANS)}" tier includes {rng.randint(1, 90)} '
            f"{rng.choice(_OBJECTS)} -- {rng.choice(_CLAUSES)}."
        )
    else:
        words = f"{rng.choice(_NOTES)[:-1]} for {rng.choice(_OBJECTS)} {rng.choice(_PERIODS)}."
    return words.split(" ")


@dataclass(frozen=True, slots=True)
class Document:
    """Paragraphs of sentences of words; sentence ids are (paragraph, index) in reading order."""

    paragraphs: tuple[tuple[tuple[str, ...], ...], ...]

    def sentences(self) -> list[tuple[str, ...]]:
        return [s for paragraph in self.paragraphs for s in paragraph]


def make_document(rng: random.Random, sentences: int, *, boilerplate: bool) -> Document:
    """A document of unique sentences; ``boilerplate`` adds one stock sentence 2-3 times."""
    seen: set[tuple[str, ...]] = set()
    flat: list[tuple[str, ...]] = []
    while len(flat) < sentences:
        sentence = tuple(make_sentence(rng))
        if sentence not in seen:
            seen.add(sentence)
            flat.append(sentence)
    if boilerplate:
        stock = tuple(rng.choice(BOILERPLATE).split(" "))
        for _ in range(rng.randint(2, 3)):
            flat.insert(rng.randint(1, len(flat)), stock)
    paragraphs = []
    at = 0
    while at < len(flat):
        size = rng.randint(2, 6)
        paragraphs.append(tuple(flat[at : at + size]))
        at += size
    return Document(tuple(paragraphs))


@dataclass(frozen=True, slots=True)
class Style:
    """How an extractor renders words: wrap width and typography."""

    wrap: int
    typeset: bool
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Rendering:
    """A rendered document and the raw span of every sentence, in reading order."""

    text: str
    spans: tuple[tuple[int, int], ...]


def _typeset_word(word: str, rng: random.Random) -> str:
    if word.startswith('"'):
        word = "\u201c" + word[1:]
    if '"' in word:
        word = word.replace('"', "\u201d")
    word = word.replace("'", "\u2019").replace("--", "\u2014").replace("...", "\u2026")
    if "fi" in word and rng.random() < 0.5:
        word = word.replace("fi", "\ufb01")
    if len(word) >= 9 and word.isalpha():
        cut = rng.randint(3, len(word) - 3)
        mark = "\u00ad" if rng.random() < 0.8 else "\u200b"
        if rng.random() < 0.3:
            word = word[:cut] + mark + word[cut:]
    return word


def render(document: Document, style: Style) -> Rendering:
    """Render ``document``: words, then wrap, recording every sentence's raw span."""
    rng = random.Random(style.seed)
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    for p_index, paragraph in enumerate(document.paragraphs):
        if p_index:
            parts.append("\n\n")
            at += 2
        column = 0
        for s_index, sentence in enumerate(paragraph):
            words = [_typeset_word(w, rng) if style.typeset else w for w in sentence]
            for w_index, whole_word in enumerate(words):
                word = whole_word
                if w_index or s_index:
                    previous = words[w_index - 1] if w_index else ""
                    if column + 1 + len(word) > style.wrap:
                        if style.typeset and word.isalpha() and len(word) >= 8 and w_index:
                            cut = len(word) // 2
                            parts.append(" " + word[:cut] + "-\n")
                            at += cut + 3
                            word, column = word[cut:], 0
                        else:
                            parts.append("\n")
                            at += 1
                            column = 0
                    else:
                        nbsp = style.typeset and previous[-1:].isdigit() and word[:1].isalpha()
                        parts.append("\u00a0" if nbsp else " ")
                        at += 1
                        column += 1
                if w_index == 0:
                    sentence_start = at
                parts.append(word)
                at += len(word)
                column += len(word)
            spans.append((sentence_start, at))
    return Rendering("".join(parts), tuple(spans))
