"""The learned half of the default coverage classifier: its inference, its file, its training.

The model's quality on the labelled sets is floored in ``test_claims.py``; here: the shipped
weights are what the tune data gives today, inference in ``exporter`` equals scikit-learn's,
and no input makes it raise or leave [0, 1].
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.checks import claims
from exporter.checks.claims import load_classifier
from exporter.checks.claims_model import FEATURES, ClaimModel, shipped_model, terms, words
from exporter.errors import SettingsError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "training"))

import claims_model as training  # noqa: E402


def test_the_shipped_weights_are_what_the_tune_data_gives() -> None:
    assert training.check(training.tune_examples()) == []


def test_a_changed_label_makes_the_shipped_weights_stale() -> None:
    examples = training.tune_examples()
    flipped = [examples[0].__class__(examples[0].text, not examples[0].claim, False, "x")]
    assert "the labelled tune data changed since the weights were written" in training.check(
        flipped + examples[1:]
    )


def test_a_weights_file_with_a_term_no_fit_gives_is_stale(tmp_path: Path) -> None:
    """A hand edit, or a merge that left a term behind, is caught though no tune text holds it."""
    document = json.loads((ROOT / "exporter" / "checks" / "claims_model.json").read_text())
    document["vocabulary"]["rimborsi"] = [-60.0, 8.0]
    edited = tmp_path / "claims_model.json"
    edited.write_text(json.dumps(document))
    problems = training.check(training.tune_examples(), edited)
    assert "the vocabulary's terms differ from a fresh fit's" in problems


def test_training_never_reads_a_measure_split() -> None:
    texts = {example.text for example in training.tune_examples()}
    data = ROOT / "tests" / "data" / "coverage"
    measured = [
        json.loads(line)["text"]
        for line in (data / "sentences.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["split"] == "measure"
    ]
    measure_sets = sorted(data.glob("answers_measure*.jsonl"))
    assert measure_sets, "the blind measure sets of whole answers (ANSWERS.md) are missing"
    for path in (data / "answers.jsonl", *measure_sets):
        for line in path.read_text(encoding="utf-8").splitlines():
            answer = json.loads(line)
            if answer["split"] == "measure":
                measured += [sentence["text"] for sentence in answer["sentences"]]
    assert len(measured) > 1300
    # not even in another case or typography: the model reads a sentence by its terms
    assert {tuple(terms(text)) for text in texts}.isdisjoint(tuple(terms(t)) for t in measured)


def test_inference_equals_scikit_learn() -> None:
    examples = training.tune_examples()[:400]
    vectorizer, model = training.fit(examples)
    fitted = ClaimModel.from_json(training.weights(examples))
    texts = [example.text for example in examples] + ["Refunds take 5 days!", "", "?? ::"]
    expected = model.predict_proba(training._matrix(vectorizer, texts, fit=False))[:, 1]
    for text, probability in zip(texts, expected, strict=True):
        assert fitted.probability(text) == pytest.approx(probability, abs=1e-4), text


def test_terms_are_folded_words_and_their_pairs() -> None:
    assert words("You CAN\u2019T \u2014 really?") == ["you", "can", "'", "t", "-", "really", "?"]
    assert terms("Hope this helps") == ["hope", "this", "helps", "hope this", "this helps"]


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "features": list(FEATURES),
        "feature_weights": [0.0, 0.0, 0.0],
        "intercept": 0.0,
        "threshold": 0.3,
        "min_known": 0.5,
        "vocabulary": {"thanks": [-4.0, 1.0], "refund": [4.0, 1.0]},
    }
    document.update(changes)
    return document


def test_a_sure_call_on_known_words_is_framing_and_unknown_words_stay_claims() -> None:
    model = ClaimModel.from_json(_document())
    assert model.probability("thanks") == pytest.approx(1 / (1 + math.exp(4)))
    assert model.is_framing("Thanks!")
    # one word in three known: too few to judge, however sure the model is
    assert model.known_share("thanks, Rüdiger Müller") == pytest.approx(1 / 3)
    assert not model.is_framing("thanks, Rüdiger Müller")
    assert not model.is_framing("")
    assert not model.is_framing("refund")


def test_weights_for_other_features_are_refused() -> None:
    with pytest.raises(ValueError, match="expected"):
        ClaimModel.from_json(_document(features=["has_digit"]))


@given(st.text(max_size=600))
def test_any_text_gets_a_probability(text: str) -> None:
    probability = shipped_model().probability(text)
    assert 0.0 <= probability <= 1.0
    assert 0.0 <= shipped_model().known_share(text) <= 1.0


def test_a_damaged_weights_file_is_a_settings_error_naming_the_classifier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broken install fails where the classifier is configured, in one line, not with a
    traceback on the first sentence."""

    def damaged() -> ClaimModel:
        raise json.JSONDecodeError("Expecting value", "", 0)

    monkeypatch.setattr(claims, "shipped_model", damaged)
    with pytest.raises(SettingsError, match=r"^classifier 'hybrid': its model cannot be loaded"):
        load_classifier("hybrid")
