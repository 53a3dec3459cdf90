"""A learned second opinion on framing: a linear model over the words of a sentence.

The rule classifier (:mod:`exporter.checks.claims`) recognises framing by its patterns and
calls the rest a claim. Phrase rules stop generalising where framing is phrased in a way no
rule foresaw ("The rules are fairly simple, so bear with me"), and every such sentence left
uncited is flagged as an uncited claim. This model reads the words instead: logistic
regression over word unigrams and bigrams (tf-idf weighted), trained by
``training/claims_model.py`` on the *tune* splits of the labelled sets only, with
scikit-learn; what ships is its weights, as JSON, so inference here is a dictionary lookup
per term and needs no dependency.

**Only ever a second opinion.** The hybrid classifier asks this model only about sentences
the rules call claims, and turns one into framing only when the model is sure, knows most of
the sentence's words of three letters or more (:meth:`ClaimModel.known_share`: "i", "in" and
"la" say nothing of the language) and the sentence holds no digit or currency sign (a number
is what a claim checks: "I'd say refunds take 14 days."). A sentence in another language, or
in vocabulary the model never saw, stays a claim (the unsure rule). Text is compared in NFC,
so a decomposed accent is one letter, as it is composed.

**Bounded.** Callers pass at most ``claims.MAX_CHARS`` code points; the work is linear in the
length (one regular expression without nested quantifiers, one lookup per term).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["ClaimModel", "shipped_model", "terms", "words"]

# Curly quotes, primes and dashes as their ASCII forms, so a curly and a straight apostrophe
# make one term (the rules fold these and a few more: exporter.checks.claims).
QUOTE_AND_DASH_FOLDS = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u00ab": '"',
    "\u00bb": '"',
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2015": "-",
    "\u2212": "-",
}
_FOLD = str.maketrans(QUOTE_AND_DASH_FOLDS)
# A word (letters, digits, underscore, any script) or one punctuation mark: "?" and ":" and
# "!" say much about framing.
_TOKEN = re.compile(r"\w+|[^\w\s]")
# A word that tells the language: three letters or more ("i", "in", "la" are in many).
_TELLING = re.compile(r"[^\W\d_]{3}")
# What a claim checks: a digit in any script, or a currency sign.
_FIGURE = re.compile(
    r"\d|[$\u00a2-\u00a5\u058f\u060b\u09f2\u09f3\u0e3f\u17db\u20a0-\u20c0\ufdfc\ufe69"
    r"\uff04\uffe0\uffe1\uffe5\uffe6]"
)

#: The extra features beside the terms, in the order the weights file lists them.
FEATURES = ("ends_colon", "ends_question", "has_digit")


# A ticket or case reference ("INC-77120", "DSR-2025-0419"): digits that name a record, not a
# figure a claim checks ("I've logged it as PRV-20817." is framing): upper-case letters, a
# hyphen, digits. "v5.3", "Q3" and "14 days" stay figures, and a reference leaves any other
# figure of the sentence one.
_REFERENCE = re.compile(r"\b[A-Z]{2,8}(?:-[0-9]{2,10}){1,3}\b")
# Cells of a table row or options of a list ("Pro Plan | Unlimited Projects", "Visa / Amex"): a
# fragment stating features, which the model reads as a heading; a claim, the unsure rule.
_TABLE_ROW = re.compile(r"\w \| \w|\w / \w")


def has_figure(sentence: str) -> bool:
    """Whether ``sentence`` holds a digit or currency sign outside a ticket reference."""
    if _FIGURE.search(sentence) is None:
        return False
    return _FIGURE.search(_REFERENCE.sub(" ", sentence)) is not None


def words(sentence: str) -> list[str]:
    """The sentence's tokens: folded (NFC, ASCII quotes and dashes), lower-cased words and
    punctuation marks."""
    return _TOKEN.findall(unicodedata.normalize("NFC", sentence.translate(_FOLD)).lower())


def terms(sentence: str) -> list[str]:
    """The terms the model weighs: every token, and every pair of adjacent tokens."""
    return _with_pairs(words(sentence))


def _with_pairs(tokens: list[str]) -> list[str]:
    return tokens + [f"{first} {second}" for first, second in itertools.pairwise(tokens)]


def features(sentence: str) -> tuple[float, ...]:
    """The extra features of :data:`FEATURES`, each 0 or 1."""
    end = sentence.rstrip()
    return (
        float(end.endswith(":")),
        float(end.endswith("?")),
        float(any(character.isdigit() for character in sentence)),
    )


@dataclass(frozen=True, slots=True)
class ClaimModel:
    """Logistic regression over tf-idf weighted terms: ``P(claim | sentence)``.

    ``vocabulary`` maps a term to ``(coefficient, idf)``; terms outside it are ignored, as
    scikit-learn's vectoriser ignores them. ``threshold`` is the probability below which the
    model calls a sentence framing; ``min_known`` the share of a sentence's telling words that
    must be exceeded by those in the vocabulary for that call to count.
    """

    vocabulary: dict[str, tuple[float, float]]
    feature_weights: tuple[float, ...]
    intercept: float
    threshold: float
    min_known: float

    def probability(self, sentence: str) -> float:
        """The model's probability that ``sentence`` is a claim."""
        return self._probability(sentence, words(sentence))

    def known_share(self, sentence: str) -> float:
        """The share of the sentence's telling words (three letters or more) the model has
        seen."""
        return self._known_share(words(sentence))

    def is_framing(self, sentence: str) -> bool:
        """Sure it is framing, on words it knows, with no figure in it and not a table row."""
        if has_figure(sentence) or _TABLE_ROW.search(sentence) is not None:
            return False
        tokens = words(sentence)
        return (
            self._known_share(tokens) > self.min_known
            and self._probability(sentence, tokens) < self.threshold
        )

    def _known_share(self, tokens: list[str]) -> float:
        seen = [token in self.vocabulary for token in tokens if _TELLING.search(token)]
        return sum(seen) / len(seen) if seen else 0.0

    def _probability(self, sentence: str, tokens: list[str]) -> float:
        vocabulary = self.vocabulary
        counts: dict[str, int] = {}
        for term in _with_pairs(tokens):
            if term in vocabulary:
                counts[term] = counts.get(term, 0) + 1
        dot = norm = 0.0
        for term, count in counts.items():
            coefficient, idf = vocabulary[term]
            weight = (1.0 + math.log(count)) * idf if count > 1 else idf
            dot += coefficient * weight
            norm += weight * weight
        score = self.intercept + (dot / math.sqrt(norm) if norm else 0.0)
        score += sum(w * x for w, x in zip(self.feature_weights, features(sentence), strict=True))
        return _sigmoid(score)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ClaimModel:
        """The model a weights file holds (written by ``training/claims_model.py``)."""
        if tuple(document["features"]) != FEATURES:
            raise ValueError(f"weights for features {document['features']}, expected {FEATURES}")
        vocabulary = {
            str(term): (float(pair[0]), float(pair[1]))
            for term, pair in document["vocabulary"].items()
        }
        return cls(
            vocabulary=vocabulary,
            feature_weights=tuple(float(w) for w in document["feature_weights"]),
            intercept=float(document["intercept"]),
            threshold=float(document["threshold"]),
            min_known=float(document["min_known"]),
        )


def _sigmoid(score: float) -> float:
    if score >= 0:
        return 1.0 / (1.0 + math.exp(-score))
    exp = math.exp(score)
    return exp / (1.0 + exp)


#: The weights file shipped in the package, next to this module.
WEIGHTS = "claims_model.json"


@functools.cache
def shipped_model() -> ClaimModel:
    """The model trained on the project's labelled sets, loaded once per process."""
    text = resources.files("exporter.checks").joinpath(WEIGHTS).read_text(encoding="utf-8")
    return ClaimModel.from_json(json.loads(text))
