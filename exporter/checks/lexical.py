"""Placeholder: the lexical judge lands from its own branch (issue 11)."""

from __future__ import annotations

from exporter.checks.entailment import EntailmentResult, Judgement

__all__ = ["LexicalJudge"]


class LexicalJudge:
    name = "lexical"

    def judge(self, claim: str, evidence: str) -> Judgement:
        return Judgement(EntailmentResult.UNKNOWN, self.name)
