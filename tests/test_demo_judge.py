"""The demo with a model judge: reworded claims for it."""

from __future__ import annotations

import pytest

from exporter.checks.entailment import EntailmentResult
from exporter.checks.lexical import LexicalJudge
from exporter.simulate.scenario import LEAD_INS, ScenarioConfig, build_scenario

# -- the scenario's reworded claims ------------------------------------------------------------


def test_reworded_claims_are_what_the_lexical_judge_leaves_to_a_model() -> None:
    config = ScenarioConfig(seed=3, answers=200)
    plain = build_scenario(config)
    reworded = build_scenario(ScenarioConfig(seed=3, answers=200, reworded_share=0.3))
    assert reworded.expected == plain.expected and reworded.misclaims == plain.misclaims
    lexical = LexicalJudge()
    changed = 0
    for before, after in zip(plain.citation_lines, reworded.citation_lines, strict=True):
        if not isinstance(after, dict) or "sentences" not in after:
            assert after == before
            continue
        assert isinstance(before, dict)
        for citation in after["citations"]:
            was = before["sentences"][citation["sentence_index"]]
            claim = after["sentences"][citation["sentence_index"]]
            if claim == was:
                continue
            changed += 1
            assert claim.startswith(LEAD_INS)
            assert lexical.judge(was, citation["quote"]).result is EntailmentResult.ENTAILED
            assert lexical.judge(claim, citation["quote"]).result is EntailmentResult.UNKNOWN
    assert changed > 50
    with pytest.raises(ValueError, match="reworded"):
        ScenarioConfig(reworded_share=1.5).validate()
