"""The sentence classifier behind coverage: claims are recognised, framing is, nothing raises.

The labelled set and its guide are ``tests/data/coverage/``. The ``measure`` split is only ever
scored here (a floor on precision and recall), never searched for failures.
"""

from __future__ import annotations

import json
import sys
import types
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from labelled_sets import (
    answer_scores,
    measure_sets,
    precision_recall,
    second_reader_scores,
    second_readings,
)

from exporter.checks import claims, claims_model
from exporter.checks.claims import (
    DEFAULT_CLASSIFIER,
    MAX_CHARS,
    HybridClassifier,
    RuleClassifier,
    SentenceClassifier,
    SentenceKind,
    load_classifier,
)
from exporter.checks.engine import Policy
from exporter.errors import SettingsError
from exporter.records.limits import MAX_ERROR_CHARS
from exporter.settings import Settings

CLAIM, FRAMING = SentenceKind.CLAIM, SentenceKind.FRAMING
DATA = Path(__file__).parent / "data" / "coverage" / "sentences.jsonl"
# whole answers written blind to the classifier (data/coverage/ANSWERS.md)
ANSWERS = Path(__file__).parent / "data" / "coverage" / "answers.jsonl"
# more blind answers, for tuning only
ANSWERS_TUNE2 = Path(__file__).parent / "data" / "coverage" / "answers_tune2.jsonl"
# blind answers for measuring only, with the mix of the set issue 22 was measured on
ANSWERS_MEASURE2 = Path(__file__).parent / "data" / "coverage" / "answers_measure2.jsonl"
# four more writers' answers of that mix, for measuring only
MEASURE = {
    int(path.stem.removeprefix("answers_measure")): path for path in measure_sets(ANSWERS.parent)
}
classifier = RuleClassifier()
hybrid = HybridClassifier()


# --- named examples ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        # the examples (the last two also occur in the labelled set's measure split)
        "To export, open Settings > Data",
        "It's free.",
        "Good news: the Pro plan includes unlimited seats.",
        # guide cases that are not in the measure split
        "Nope, not to the Canary Islands.",
        "- Kanban board",
        "According to section 8.2, either party may terminate immediately for material breach.",
        "Coverage decisions are made by the claims team, not by the chat assistant.",
        "Chat transcripts are stored for 30 days.",
        "Don't worry, your data is safe.",
        "It depends on where you're based: EU customers get a 14-day cooling-off period.",
        "Your order #48213 shipped on March 3 and is with the carrier.",
        # written for these tests
        "I'm not a lawyer, but the withdrawal right ends once you start using the service.",
        "I checked your account and your plan renews on May 1.",
        "The docs I have say refunds take 5 business days.",
        "Did you know that exports are free?",
        "I don't think the Pro plan includes SSO.",
        "It's a good idea to enable 2FA on every admin account.",
        "Enjoy 20% off your first month with the code WELCOME.",
        "Hi Anna, your refund was approved yesterday.",
        "Is it free? Yes, for the first year.",
        "There are two ways to export: through the API or from **Settings > Data**.",
        "Welcome emails are sent within an hour of sign-up.",
        "**Exports expire after 7 days.**",
        # what the assistant noted, flagged or confirmed in a "that" clause is stated
        "I've noted that refunds take about a week.",
        "I've flagged on the ticket that your card was charged twice.",
        # bare answers assert what was asked
        "Of course.",
        "Unfortunately not.",
        "Yes.",
    ],
)
def test_claims(sentence: str) -> None:
    assert classifier.classify(sentence) is CLAIM


@pytest.mark.parametrize(
    "sentence",
    [
        # the examples
        "Here is what I found:",
        "I couldn't find anything more specific.",
        # guide cases that are not in the measure split
        "Have you tried turning it off and on again?",
        "**Pricing overview**",
        "The documents I have don't mention GDPR.",
        "I'm not able to see your account details from here.",
        "I checked 3 articles for you.",
        "Just reply here if you get stuck on step 3.",
        "It's a good idea to keep your receipts.",
        "We take security very seriously.",
        "Please note that this summary may not reflect the latest revision of the policy.",
        # written for these tests
        "Great question!",
        "Hi there, thanks for reaching out.",
        "Is there anything else I can help with?",
        "I've escalated this to our billing team.",
        "I'm an AI assistant, so I can't see your account.",
        "Hope that helps, and have a nice weekend!",
        "## Next steps",
        "I understand how frustrating a late refund can be.",
        "The articles I found only cover the mobile app.",
    ],
)
def test_framing(sentence: str) -> None:
    assert classifier.classify(sentence) is FRAMING


@pytest.mark.parametrize("sentence", ["", "   \n\t", "...", "?!", "**", "- ", "\u200b", "🙂"])
def test_nothing_to_check_is_framing(sentence: str) -> None:
    assert classifier.classify(sentence) is FRAMING


def test_a_long_sentence_is_a_claim_unexamined() -> None:
    long_thanks = "Thank you for the " + "very " * MAX_CHARS
    assert classifier.classify(long_thanks[: MAX_CHARS - 1] + "!") is FRAMING
    assert classifier.classify(long_thanks[:MAX_CHARS] + "!") is CLAIM


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Dana from Ledgerly Support", FRAMING),
        ("Helen Marsh, Enterprise Accounts \u2014 Quillstone Software", FRAMING),
        ("Best regards, Customer Success", FRAMING),
        ("Unlimited", CLAIM),
        ("- Implants", CLAIM),
        ("Apologies for the delay on this one, Fatima.", FRAMING),
        ("Great question! No.", CLAIM),
        ("Sorry, but no.", CLAIM),
        ("Hi! \U0001f44b", FRAMING),
        ("Rental car abroad \u2014 covered or not?", FRAMING),
        ("Did you know that exports are free?", CLAIM),
        ("Neither of them says anything about nonprofit discounts, unfortunately.", FRAMING),
        ("Happy to report that refunds are instant.", CLAIM),
    ],
)
def test_sign_offs_emoji_and_trailing_words(sentence: str, kind: SentenceKind) -> None:
    """Issue 22's framing units, and the bare answers they must leave alone."""
    assert classifier.classify(sentence) is kind


def test_curly_quotes_and_markdown_fold() -> None:
    assert classifier.classify("I couldn\u2019t find a price for that.") is FRAMING
    assert classifier.classify("1. **Thanks** for your patience!") is FRAMING
    assert classifier.classify("> Orders ship within 24 hours.") is CLAIM


# --- the labelled set -------------------------------------------------------------------------


def _scores(split: str) -> tuple[float, float, int]:
    """Precision and recall of the claim class on one split, and the split's size."""
    return precision_recall(
        DATA,
        split,
        lambda row: classifier.classify(row["text"]) is CLAIM,
        lambda row: row["label"] == "claim",
    )


# Measured once with bench/claims_bench.py: tune 1.000 precision and 1.000 recall (the rules were
# written looking at tune), measure 0.863 and 1.000 (139 claims, 96 framing). Floors a couple of
# points below, so a regression fails here.
@pytest.mark.parametrize(
    ("split", "precision_floor", "recall_floor"),
    [("tune", 0.98, 0.98), ("measure", 0.84, 0.98)],
)
def test_labelled_set_floors(split: str, precision_floor: float, recall_floor: float) -> None:
    precision, recall, total = _scores(split)
    assert total > 200
    assert precision >= precision_floor, f"{split}: claim precision {precision:.3f}"
    assert recall >= recall_floor, f"{split}: claim recall {recall:.3f}"


# Issue 22, part 4: framing misread as claims made a quarter of the uncited-claim flags wrong
# on answers the project had not seen. Measured with bench/claims_bench.py on whole answers
# written blind to the classifier (data/coverage/ANSWERS.md): answers.jsonl's measure split is
# never tuned on; its tune split and answers_tune2.jsonl are what the rules' framing units were
# written against and what the model (training/claims_model.py) is trained on.
# The rules alone: measure framing recall 0.590 before issue 22, 0.776 after its rules, with
# uncited-claim precision 0.192 and 0.303; claim recall 1.000 throughout.
# The hybrid (rules, then the model): measure framing recall 0.966, claim recall 0.984,
# uncited-claim precision 0.720. The floors keep what was won, a couple of points below.
# answers_measure2.jsonl (150 answers written blind on 2026-12-07, about 0.64 uncited claims
# per framing sentence, as in the set that opened issue 22; 289 framing, 185 uncited claims),
# read once: framing recall 0.917, claim recall 0.989, uncited-claim precision 0.882; with
# answers_tune9 and 10 in the training, 0.924, 0.991 and 0.891. answers_measure3 to 6 (four
# more writers, 2026-12-07): 0.829, 0.998, 0.777; 0.911, 0.993, 0.862; 0.918, 0.995, 0.878;
# 0.910, 0.991, 0.854 (the five together: 0.898, 0.994, 0.849). With the second round of
# rules of place (closing wishes, sign-offs in more languages, short answers kept from the
# model), measure3 and 4 read 0.835, 0.998, 0.783 and 0.914, 0.993, 0.865 (together: 0.899,
# 0.994, 0.851).
@pytest.mark.parametrize(
    ("judge", "path", "split", "framing_floor", "precision_floor"),
    [
        ("rules", ANSWERS, "tune", 0.95, 0.79),
        ("rules", ANSWERS_TUNE2, "tune", 0.89, 0.50),
        ("rules", ANSWERS, "measure", 0.75, 0.28),
        ("hybrid", ANSWERS, "tune", 0.98, 0.95),
        ("hybrid", ANSWERS_TUNE2, "tune", 0.98, 0.95),
        ("hybrid", ANSWERS, "measure", 0.95, 0.68),
        ("hybrid", ANSWERS_MEASURE2, "measure", 0.90, 0.86),
        ("hybrid", MEASURE[3], "measure", 0.80, 0.75),
        ("hybrid", MEASURE[4], "measure", 0.89, 0.84),
        ("hybrid", MEASURE[5], "measure", 0.89, 0.85),
        ("hybrid", MEASURE[6], "measure", 0.89, 0.83),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else str(value),
)
def test_blind_answers_floors(
    judge: str, path: Path, split: str, framing_floor: float, precision_floor: float
) -> None:
    chosen = load_classifier(judge)
    scores = answer_scores(path, split, chosen)
    assert scores.sentences > 300
    assert scores.claim_recall >= 0.98, scores.line(split)
    assert scores.framing_recall >= framing_floor, scores.line(split)
    assert scores.uncited_precision >= precision_floor, scores.line(split)


@pytest.mark.parametrize(
    "path", sorted(ANSWERS.parent.glob("answers*.jsonl")), ids=lambda path: path.name
)
def test_each_set_of_blind_answers_has_the_shape_answers_md_gives(path: Path) -> None:
    """The scores above mean what they say only if each set is what ANSWERS.md describes: a
    set named for measuring is measure through and through, framing is never cited, and no
    text repeats (a repeated sentence would count twice)."""
    answers = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    texts = [sentence["text"] for answer in answers for sentence in answer["sentences"]]
    assert len(texts) == len(set(texts))
    assert len({answer["id"] for answer in answers}) == len(answers)
    splits = {answer["split"] for answer in answers}
    if "measure" in path.name:
        assert splits == {"measure"}
    elif "tune" in path.name:
        assert splits == {"tune"}
    for answer in answers:
        assert 3 <= len(answer["sentences"]) <= 10, answer["id"]
        for sentence in answer["sentences"]:
            assert sentence["label"] in {"claim", "framing"}, answer["id"]
            assert type(sentence["cited"]) is bool, answer["id"]
            assert not (sentence["cited"] and sentence["label"] == "framing"), answer["id"]


@pytest.mark.parametrize(
    ("path", "second"), second_readings(ANSWERS.parent), ids=lambda path: path.name
)
def test_a_second_reader_agrees_with_the_labels_of_a_measure_set(path: Path, second: Path) -> None:
    """The precision goal is read against one writer's labels; a second reader, labelling the
    same answers blind (ANSWERS.md), agrees on 98.8% and 99.2% of their sentences, and their
    flags would meet the goal (0.949 and 0.968): what is missing is the classifier's, not the
    labels' (2026-12-07). A reading for another set, or a changed label, must keep that so."""
    scores, agree = second_reader_scores(path, second)
    assert scores.sentences > 800
    assert agree / scores.sentences >= 0.98, f"{agree} of {scores.sentences}"
    assert scores.uncited_precision >= 0.90, scores.line("measure")
    assert scores.claim_recall >= 0.98, scores.line("measure")


# The single labelled sentences' measure split, with the hybrid: claim precision 1.000 and
# recall 0.986 (the rules alone: 0.903 and 1.000).
def test_labelled_set_floors_of_the_default() -> None:
    precision, recall, _ = precision_recall(
        DATA,
        "measure",
        lambda row: hybrid.classify(row["text"]) is CLAIM,
        lambda row: row["label"] == "claim",
    )
    assert precision >= 0.97, f"claim precision {precision:.3f}"
    assert recall >= 0.98, f"claim recall {recall:.3f}"


# Claims in languages the model never saw stay claims: it knows too few of their words to call
# them framing, and the rules never call them framing (the unsure rule).
@pytest.mark.parametrize(
    "sentence",
    [
        "Der Befehl gibt die Anzahl der Zeilen aus.",
        "Ihre Bestellung wird innerhalb von drei Werktagen versandt.",
        "Das Passwort muss mindestens zwölf Zeichen lang sein.",
        "Puede cancelar su suscripción en cualquier momento.",
        "La garantía cubre defectos de fabricación durante dos años.",
        "Vous pouvez annuler votre abonnement à tout moment.",
        "Les retours sont gratuits pour les membres.",
        "このオプションは出力を抑制します。",
        "ファイルが存在する場合は上書きされます。",
        "退款将在十四个工作日内处理。",
        # found by a hostile review: "i" and "in" are English words too, and NFD splits words
        "I server sono in Europa.",
        "I file sono in formato PDF.",
        "I plugin sono gratuiti.",
        "I rimborsi sono gratuiti per i membri premium.",
        "I report sono disponibili in CSV.",
        "I pagamenti sono mensili.",
        unicodedata.normalize("NFD", "Mật khẩu phải dài ít nhất mười hai ký tự."),
        unicodedata.normalize("NFD", "Obrigado, o reembolso não é possível."),
        "Pwede mo i-cancel ang subscription anytime.",
    ],
)
def test_claims_in_other_languages_stay_claims(sentence: str) -> None:
    assert hybrid.classify(sentence) is CLAIM


# Greetings, thanks and wishes in the languages answers mix in: the model knows too few of
# their words to call them framing, so the rules must (each was flagged as an uncited claim).
@pytest.mark.parametrize(
    "sentence",
    [
        "Bonne journée !",
        "Bonsoir Claire, merci pour votre message.",
        "Buona fortuna con il corso!",
        "Grazie mille!",
        "Bom dia Ana, obrigada pelo contato.",
        "Boa sorte com a migração!",
        "Hoi Sanne!",
        "Fijne avond!",
        "Met vriendelijke groet, Pieter",
        "Dzień dobry Panie Tomaszu, thank you for your patience.",
        "Miłego weekendu!",
        "Merhaba Emre Bey, thanks for reaching out.",
        "İyi akşamlar!",
        "Namaskar, and welcome to the help desk.",
        "Tack så mycket!",
        "Lycka till med kursen!",
        "Viel Erfolg mit dem neuen Team!",
        "Kiitos!",
    ],
)
@pytest.mark.parametrize("judge", [classifier, hybrid], ids=["rules", "hybrid"])
def test_greetings_and_wishes_in_other_languages_are_framing(
    judge: SentenceClassifier, sentence: str
) -> None:
    assert judge.classify(sentence) is FRAMING


# ... while a claim that opens with a word of thanks stays one: "merci de noter que" is "please
# note that", "tack vare", "dzięki" and "grazie a" are "thanks to" (the first was framing).
@pytest.mark.parametrize(
    "sentence",
    [
        "Merci de noter que la garantie couvre deux ans.",
        "Grazie alla nuova API, i report sono più veloci.",
        "Tack vare den nya API:n är rapporterna snabbare.",
        "Dzięki nowemu API raporty są szybsze.",
        "Dank der neuen API sind die Berichte schneller.",
        "Bonne nouvelle : le remboursement est automatique.",
    ],
)
@pytest.mark.parametrize("judge", [classifier, hybrid], ids=["rules", "hybrid"])
def test_a_claim_opening_with_thanks_in_another_language_stays_a_claim(
    judge: SentenceClassifier, sentence: str
) -> None:
    assert judge.classify(sentence) is CLAIM


# A ticket reference names a record; it is no figure a claim checks, so the model may call a
# sentence around one framing ("I've noted it on INC-20817." was a claim for its digits).
@pytest.mark.parametrize(
    "sentence",
    [
        "I've added your screenshots to case CASE-48213.",
        "I've passed your notes on to the team under ticket HR-5512.",
    ],
)
def test_a_ticket_reference_is_no_figure(sentence: str) -> None:
    assert hybrid.classify(sentence) is FRAMING


@pytest.mark.parametrize(
    ("sentence", "figure"),
    [
        ("Your reference is INC-77120.", False),
        ("Logged as DSR-2025-0419.", False),
        ("Ticket INC-4411 says refunds take 14 days.", True),
        ("INC-4411 was fixed in release 3.2.", True),
        ("Version v5.3 drops the old endpoint.", True),
        ("The Q3 invoice is attached.", True),
        ("It costs $ per seat.", True),
        ("inc-4411 is closed.", True),
    ],
)
def test_has_figure(sentence: str, figure: bool) -> None:
    assert claims_model.has_figure(sentence) is figure


# Found by a hostile review: hedged or apologetic claims with a figure were read as framing.
@pytest.mark.parametrize(
    "sentence",
    [
        "I'd say refunds take 14 days.",
        "I'd say your plan allows 3 users.",
        "I'm afraid refunds take 14 days!",
        "I see that the API returns at most 1000 rows!",
        "Good question: the fee is $25?",
        "Max upload: 2 GB?",
        "I'd say it costs £40.",
        "I've noted on INC-20817 that refunds take 14 days.",
    ],
)
def test_a_sentence_with_a_figure_is_never_turned_into_framing(sentence: str) -> None:
    assert hybrid.classify(sentence) is CLAIM


class _Lying(str):
    """A str whose methods raise and whose length lies."""

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return 1

    def lower(self) -> str:
        raise RuntimeError("lower")

    def translate(self, table: object) -> str:
        raise RuntimeError("translate")


@pytest.mark.parametrize("judge", [classifier, hybrid], ids=["rules", "hybrid"])
def test_a_str_subclass_is_read_as_its_text(judge: object) -> None:
    assert judge.classify(_Lying("Thanks! " * 100_000)) is CLAIM  # type: ignore[attr-defined]
    assert judge.classify(_Lying("Thanks!")) is FRAMING  # type: ignore[attr-defined]


# --- properties -------------------------------------------------------------------------------

any_character = st.characters(codec=None, categories=None, exclude_categories=())
hostile_text = (
    st.text()
    | st.text(alphabet=any_character, max_size=200)
    | st.builds(
        lambda piece, times: piece * times,
        st.text(alphabet=any_character, min_size=1, max_size=12),
        st.integers(min_value=1, max_value=200_000),
    )
    | st.builds(
        lambda framing, middle: f"{framing} {middle} {framing}",
        st.sampled_from(["Thanks!", "I'm sorry", "Is it", "Here's", "I found", "**"]),
        st.text(alphabet=any_character, max_size=MAX_CHARS),
    )
)


@given(hostile_text)
def test_any_text_gets_a_kind(text: str) -> None:
    assert classifier.classify(text) in (CLAIM, FRAMING)
    assert hybrid.classify(text) in (CLAIM, FRAMING)


@given(hostile_text)
def test_the_model_only_ever_turns_claims_into_framing(text: str) -> None:
    if classifier.classify(text) is FRAMING:
        assert hybrid.classify(text) is FRAMING


OPENERS = [
    "Great question! ",
    "Good news: ",
    "Sorry, but ",
    "Thanks for asking! ",
    "Happy to help! ",
    "Hi Anna, ",
    "Unfortunately, ",
    "I'm not a lawyer, but ",
    "According to the help center, ",
    "I think ",
    "Don't worry, ",
    "Of course! ",
    "Hello! Thanks for reaching out. ",
]
CLAIMS = [
    "The Pro plan costs $29 per user per month.",
    "refunds reach your card within 5 business days.",
    "exports are limited to 10,000 rows.",
    "your policy doesn't cover flood damage.",
    "to reset your password, choose **Forgot password** on the sign-in page.",
    "it's free.",
    "no.",
    "SSO is only available on Enterprise.",
]


@given(st.lists(st.sampled_from(OPENERS), min_size=1, max_size=3), st.sampled_from(CLAIMS))
def test_a_friendly_opener_keeps_a_claim_a_claim(openers: list[str], claim: str) -> None:
    assert classifier.classify(claim) is CLAIM
    assert classifier.classify("".join(openers) + claim) is CLAIM


@given(st.sampled_from(CLAIMS), st.sampled_from(["", "- ", "1. ", "* ", "> "]))
def test_a_list_marker_keeps_a_claim_a_claim(claim: str, marker: str) -> None:
    assert classifier.classify(marker + claim) is CLAIM


# --- load_classifier ----------------------------------------------------------------------------


class ShoutClassifier:
    """A test-local classifier: a sentence in capitals is a claim."""

    def classify(self, sentence: str) -> SentenceKind:
        return CLAIM if sentence.isupper() else FRAMING


def _make_shout() -> ShoutClassifier:
    return ShoutClassifier()


def _failing_factory() -> ShoutClassifier:
    raise RuntimeError("no model file")


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> str:
    """A module ``claims_plugin`` holding classifiers and things that are not classifiers."""
    module = types.ModuleType("claims_plugin")
    attributes = {
        "ShoutClassifier": ShoutClassifier,
        "make": _make_shout,
        "instance": ShoutClassifier(),
        "namespace": types.SimpleNamespace(instance=ShoutClassifier()),
        "not_a_classifier": 42,
        "makes_nothing": lambda: None,
        "fails": _failing_factory,
    }
    for name, value in attributes.items():
        setattr(module, name, value)
    monkeypatch.setitem(sys.modules, "claims_plugin", module)
    return "claims_plugin"


def test_hybrid_is_the_default_and_rules_can_be_chosen() -> None:
    assert DEFAULT_CLASSIFIER == "hybrid"
    assert isinstance(load_classifier(DEFAULT_CLASSIFIER), HybridClassifier)
    assert isinstance(load_classifier(" Hybrid "), HybridClassifier)
    assert isinstance(load_classifier("rules"), RuleClassifier)
    assert isinstance(load_classifier(" rules "), RuleClassifier)
    assert isinstance(RuleClassifier(), SentenceClassifier)
    assert isinstance(HybridClassifier(), SentenceClassifier)
    assert isinstance(Policy().classifier, HybridClassifier)
    assert Settings().coverage_classifier == DEFAULT_CLASSIFIER


@pytest.mark.parametrize("attribute", ["ShoutClassifier", "make", "instance", "namespace.instance"])
def test_module_attribute(plugin: str, attribute: str) -> None:
    loaded = load_classifier(f"{plugin}:{attribute}")
    assert isinstance(loaded, ShoutClassifier)
    assert loaded.classify("FREE") is CLAIM
    assert loaded.classify("thanks") is FRAMING


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "expected 'hybrid', 'rules' or 'module.path:attribute'"),
        ("regex", "expected 'hybrid', 'rules' or 'module.path:attribute'"),
        ("claims_plugin:", "expected 'hybrid', 'rules' or 'module.path:attribute'"),
        (":ShoutClassifier", "expected 'hybrid', 'rules' or 'module.path:attribute'"),
        ("no_such_module_for_claims:Thing", "module 'no_such_module_for_claims' not found"),
        ("claims_plugin.sub:Thing", "module 'claims_plugin.sub' not found"),
        ("claims_plugin:Missing", "has no attribute 'Missing'"),
        ("claims_plugin:not_a_classifier", "has no classify method"),
        ("claims_plugin:makes_nothing", "has no classify method"),
        ("claims_plugin:fails", "calling 'fails' failed: RuntimeError('no model file')"),
    ],
)
def test_bad_specs(plugin: str, spec: str, problem: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_classifier(spec)
    message = str(raised.value)
    assert f"classifier {spec!r}" in message
    assert problem in message
    assert "\n" not in message


def test_a_plugin_whose_import_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "broken_claims_plugin.py").write_text("import no_such_dependency_for_claims\n")
    (tmp_path / "raising_claims_plugin.py").write_text("raise RuntimeError('bad config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SettingsError, match="importing 'broken_claims_plugin' failed"):
        load_classifier("broken_claims_plugin:Thing")
    with pytest.raises(SettingsError, match="importing 'raising_claims_plugin' failed"):
        load_classifier("raising_claims_plugin:Thing")


# --- the fast paths decide as the plain rules do ------------------------------------------------


def _normalise_plainly(sentence: str) -> tuple[str, bool]:
    """Every normalisation step, always: what claims._normalise's shortcuts must equal."""
    without_emoji = claims._EMOJI.sub(" ", sentence)
    text = claims._SPACE.sub(" ", without_emoji.translate(claims._FOLD)).strip().casefold()
    text = claims._SPACED_DASH.sub("; ", text)
    heading = claims._HEADING.fullmatch(text) is not None
    marker = claims._LIST_MARK.match(text)
    if marker is not None:
        text = text[marker.end() :]
        heading = False
    return claims._EMPHASIS.sub("", text).strip(), heading


def _is_framing_with_every_unit(text: str) -> bool:
    """claims._is_framing, trying every framing unit at every step (no unit left out)."""
    return claims._is_framing(text, claims.framing_units(True))


markdown_text = st.text(
    alphabet=st.sampled_from(list("ab1 -*_#>[]x.)?!:\t\n\u2019\u201c\u2014\u200b")), max_size=40
)
with DATA.open(encoding="utf-8") as _lines:  # inputs only; no decision is read from them
    tune_texts = [row["text"] for row in map(json.loads, _lines) if row["split"] == "tune"]


@given(st.one_of(hostile_text.filter(lambda t: len(t) <= 2000), markdown_text))
def test_normalising_with_shortcuts_equals_normalising_plainly(text: str) -> None:
    assert claims._normalise(text) == _normalise_plainly(text)


@given(
    st.one_of(
        st.sampled_from(tune_texts),
        st.builds(
            lambda framing, emotion, rest: f"{framing} {emotion} {rest}",
            st.sampled_from(["I know this is", "Sorry,", "How", "That sounds", "Is it"]),
            st.sampled_from(["frustrating", "no fun", "a hassle", "confusing", "fine", "?"]),
            st.sampled_from(["", "right?", "for you.", "and the fee is $5.", "?"]),
        ),
    )
)
def test_leaving_out_units_that_cannot_match_changes_no_decision(text: str) -> None:
    normalised, _ = claims._normalise(text)
    assert claims._is_framing(normalised) == _is_framing_with_every_unit(normalised)


# -- hostile specs and plug-ins (issue 10 review) ---------------------------------------------


class _ClassifyProperty:
    """``classify`` is a property that raises: looking it up is itself a failure."""

    @property
    def classify(self) -> object:
        raise RuntimeError("property boom")


class _ExplodingGetattr:
    def __getattr__(self, name: str) -> object:
        raise ValueError("getattr boom")


def _exits() -> None:
    sys.exit(0)


@pytest.fixture
def hostile_plugin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Modules that exit at import (with 0 and with 1) or raise a long, multi-line error."""
    (tmp_path / "exiting0_claims_plugin.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "exiting1_claims_plugin.py").write_text("raise SystemExit(1)\n")
    (tmp_path / "chatty_claims_plugin.py").write_text(
        "raise RuntimeError('line one\\nline two ' + 'x' * 5000)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = types.ModuleType("hostile_claims_plugin")
    module.property_instance = _ClassifyProperty()  # type: ignore[attr-defined]
    module.getattr_instance = _ExplodingGetattr()  # type: ignore[attr-defined]
    module.exits = _exits  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hostile_claims_plugin", module)
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        # a SystemExit would end the process with its code, silently: a deploy gate passing (0)
        # or failing (1) without having swept anything
        ("exiting0_claims_plugin:X", "importing 'exiting0_claims_plugin' failed: SystemExit(0)"),
        ("exiting1_claims_plugin:X", "importing 'exiting1_claims_plugin' failed: SystemExit(1)"),
        ("sys:exit", "calling 'exit' failed: SystemExit"),
        ("hostile_claims_plugin:exits", "calling 'exits' failed: SystemExit(0)"),
        ("hostile_claims_plugin:property_instance", "RuntimeError('property boom')"),
        ("hostile_claims_plugin:getattr_instance", "ValueError('getattr boom')"),
    ],
)
def test_a_plugin_that_exits_or_raises_anywhere_is_a_settings_error(
    hostile_plugin: Path, spec: str, problem: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        load_classifier(spec)
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    "spec",
    [
        "chatty_claims_plugin:X",
        "m" * 10_000 + ":x",
        "os:" + "a" * 10_000,
        "é模块\n\x1b[31m" * 2000 + ":y",
        ".relative:y",
        "..:y",
    ],
)
def test_a_classifier_error_is_one_short_line_whatever_the_spec(
    hostile_plugin: Path, spec: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        load_classifier(spec)
    message = str(raised.value)
    assert message.startswith("classifier ")
    assert len(message) <= MAX_ERROR_CHARS
    assert "\n" not in message and "\x1b" not in message
