"""Placeholder: the rule classifier lands from its own branch (issue 10)."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

__all__ = ["RuleClassifier", "SentenceClassifier", "SentenceKind", "load_classifier"]


class SentenceKind(StrEnum):
    CLAIM = "claim"
    FRAMING = "framing"


class SentenceClassifier(Protocol):
    def classify(self, sentence: str) -> SentenceKind: ...


class RuleClassifier:
    def classify(self, sentence: str) -> SentenceKind:
        text = sentence.strip()
        if not text or text.endswith("?") or text.lower().startswith(("thanks", "hope this")):
            return SentenceKind.FRAMING
        return SentenceKind.CLAIM


def load_classifier(spec: str) -> SentenceClassifier:
    if spec != "rules":
        from exporter.errors import SettingsError  # noqa: PLC0415 - placeholder

        raise SettingsError(f"cannot load the classifier {spec}")
    return RuleClassifier()
