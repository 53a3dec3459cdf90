"""Scoring a classifier on a labelled set's split: the helpers the floors tests share."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from exporter.checks.claims import SentenceClassifier
from exporter.checks.coverage import check_coverage

__all__ = [
    "AnswerScores",
    "answer_scores",
    "measure_sets",
    "precision_recall",
    "second_reader_scores",
    "second_readings",
]


def precision_recall(
    path: Path,
    split: str,
    predicted: Callable[[dict[str, Any]], bool],
    actual: Callable[[dict[str, Any]], bool],
) -> tuple[float, float, int]:
    """Precision and recall of the positive class on one split of a JSONL set, and its size."""
    tp = fp = fn = total = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row["split"] != split:
                continue
            total += 1
            guess, truth = predicted(row), actual(row)
            tp += guess and truth
            fp += guess and not truth
            fn += truth and not guess
    return tp / (tp + fp), tp / (tp + fn), total


@dataclass(frozen=True, slots=True)
class AnswerScores:
    """A classifier on whole labelled answers, as coverage uses it: a cited sentence is a claim
    by the answer's own account; an uncited one the classifier calls a claim is flagged. Counts,
    so that sets can be pooled by adding them (:meth:`pooled`); the ratios are derived."""

    framing: int
    framing_right: int
    claims: int
    claims_right: int
    # claims with no citation: the mix the precision depends on, against ``framing``
    uncited_claims: int
    # flags raised, and those of them on framing
    flags: int
    framing_flags: int

    @property
    def sentences(self) -> int:
        return self.framing + self.claims

    @property
    def framing_recall(self) -> float:
        return self.framing_right / self.framing

    @property
    def claim_recall(self) -> float:
        return self.claims_right / self.claims

    @property
    def uncited_precision(self) -> float:
        """Of the sentences flagged as uncited claims, the share that are claims."""
        return 1.0 - self.framing_flags / self.flags if self.flags else 1.0

    @classmethod
    def pooled(cls, every: Iterable[AnswerScores]) -> AnswerScores:
        """Several sets scored as one."""
        return cls(*(sum(column) for column in zip(*map(astuple, every), strict=True)))

    def line(self, split: str) -> str:
        return (
            f"{split}: framing recall {self.framing_recall:.3f}, claim recall "
            f"{self.claim_recall:.3f}, uncited-claim precision {self.uncited_precision:.3f} "
            f"({self.framing_flags} of {self.flags} flags framing; {self.sentences} sentences, "
            f"{self.framing} framing, {self.uncited_claims} uncited claims)"
        )


def measure_sets(data: Path) -> list[Path]:
    """The blind sets of whole answers for measuring only, with the mix of deployed assistants
    (ANSWERS.md)."""
    return sorted(data.glob("answers_measure*.jsonl"))


def second_readings(data: Path) -> list[tuple[Path, Path]]:
    """The measure sets a second reader labelled, each with its labels (ANSWERS.md)."""
    return [(data / second.name, second) for second in sorted(data.glob("second_reader/*.jsonl"))]


def answer_scores(path: Path, split: str, classifier: SentenceClassifier) -> AnswerScores:
    """Scores of ``classifier`` on one split of a JSONL set of labelled answers (ANSWERS.md),
    each answer put through coverage itself (which tells the classifier where each sentence
    sits, when it asks)."""
    said: list[tuple[bool, bool, bool]] = []
    for answer in _answers(path):
        if answer["split"] != split:
            continue
        sentences = answer["sentences"]
        cited = {index for index, sentence in enumerate(sentences) if sentence["cited"]}
        verdict = check_coverage(
            answer["id"], None, [s["text"] for s in sentences], cited, classifier
        )
        said_claim = set(verdict.claims)
        said += [
            (sentence["label"] == "claim", sentence["cited"], index in said_claim)
            for index, sentence in enumerate(sentences)
        ]
    return _scores(said)


def second_reader_scores(path: Path, second: Path) -> tuple[AnswerScores, int]:
    """A second reader's labels of the measure set at ``path`` (``second``: one
    ``{"id", "labels"}`` line an answer, written blind to the first labels, ANSWERS.md) scored
    as a classifier against the first, as coverage would flag them; and on how many sentences
    the two agree."""
    labels = {row["id"]: row["labels"] for row in _answers(second)}
    said: list[tuple[bool, bool, bool]] = []
    agree = 0
    for answer in _answers(path):
        theirs = labels[answer["id"]]
        if len(theirs) != len(answer["sentences"]):
            raise ValueError(f"{second.name}: {answer['id']} has {len(theirs)} labels")
        for sentence, label in zip(answer["sentences"], theirs, strict=True):
            truth = sentence["label"] == "claim"
            agree += truth == (label == "claim")
            said.append((truth, sentence["cited"], sentence["cited"] or label == "claim"))
    return _scores(said), agree


def _answers(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _scores(said: Iterable[tuple[bool, bool, bool]]) -> AnswerScores:
    """The counts of sentences given as (labelled a claim, cited, said to be a claim)."""
    framing = framing_right = claims = claims_right = flagged = flagged_right = uncited = 0
    for truth, cited, claim in said:
        framing += not truth
        framing_right += not truth and not claim
        claims += truth
        claims_right += truth and claim
        uncited += truth and not cited
        if claim and not cited:
            flagged += 1
            flagged_right += truth
    return AnswerScores(
        framing, framing_right, claims, claims_right, uncited, flagged, flagged - flagged_right
    )
