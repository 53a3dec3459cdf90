"""Which sentences of an answer are claims: the sentence classifier behind coverage (issue 10).

Coverage asks whether every *claim-bearing* sentence of an answer is supported by a citation, so
each sentence is first sorted into a claim (it asserts something a reader could check against a
source: a fact, a price, a limit, a date, a procedure, a permission, a consequence) or framing
(greetings, thanks, apologies, restating the question, announcing structure, offers of help,
questions to the user, sign-offs, statements about the assistant, the conversation or the
retrieval, and advice that asserts nothing checkable). ``tests/data/coverage/README.md`` is the
labelling guide this module follows.

**The unsure rule.** Missing a claim is worse than flagging framing: an uncited claim that goes
unnoticed is the failure coverage exists to catch. So the default classifier recognises framing
*positively*, by patterns of framing, and calls everything else a claim. A sentence is framing
only when it is consumed from start to end by framing units (a greeting, "thanks for ...", "I
couldn't find ...", a question to the user ...), joined by punctuation and connectives; a hedge,
an attribution or a friendly opener ("I think", "According to section 8.2,", "Good news:") is
stripped and what follows decides. Anything left over that no framing pattern explains is a
claim, whatever it is.

**Sign-offs are read as written.** A name line ("Dana from Ledgerly Support", "People Team")
asserts nothing, but only its capitals tell it from a bare answer ("Yes", "Unlimited"), so it
is recognised before the sentence is folded; emoji and Slack shortcodes are decoration, and a
name after framing and a comma ("Apologies for the delay, Fatima.") is the person addressed.

**Rules first, a model second.** The rules are compiled regular expressions over a normalised
sentence: a few microseconds per sentence, and every decision can be read in this file. Phrase
rules stop generalising where framing is phrased as no rule foresaw, so the default classifier
(:class:`HybridClassifier`) asks a learned model (:mod:`exporter.checks.claims_model`) about
each sentence the rules call a claim, and makes it framing only when the model is sure and
knows most of its words. The model never turns framing into a claim, and a sentence it cannot
read (another language, unseen vocabulary) stays a claim: the unsure rule holds.

**Bounded input.** Any ``str`` may arrive. A sentence longer than :data:`MAX_CHARS` code points is
a claim without being examined (the unsure rule; no framing sentence is that long), so the work
per call is bounded whatever the input; below that it is linear in the length. No expression
nests quantifiers over overlapping alternatives, so none can backtrack catastrophically, and the
number of framing units examined per sentence is capped too. An empty, whitespace-only or
punctuation-only sentence (no letter or digit in any script) is framing: there is nothing in it
to check.

Another classifier replaces the default by configuration: :func:`load_classifier` takes
``"hybrid"`` (the default), ``"rules"`` (the rules alone) or ``"module.path:attribute"``.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Collection, Sequence
from enum import IntFlag, StrEnum
from typing import Protocol, cast, runtime_checkable

from exporter.checks.claims_model import QUOTE_AND_DASH_FOLDS, shipped_model
from exporter.errors import SettingsError
from exporter.records.limits import bounded, preview

__all__ = [
    "DEFAULT_CLASSIFIER",
    "MAX_CHARS",
    "HybridClassifier",
    "Place",
    "RuleClassifier",
    "SentenceClassifier",
    "SentenceKind",
    "load_classifier",
    "place",
]

#: The classifier coverage uses unless configured otherwise (a :func:`load_classifier` spec).
DEFAULT_CLASSIFIER = "hybrid"
#: Longer sentences are claims without being examined (the unsure rule, and bounded work).
MAX_CHARS = 500
# At most this many framing units are consumed from one sentence; more than that is a claim.
_MAX_UNITS = 12


class SentenceKind(StrEnum):
    """What a sentence of an answer is, for coverage."""

    CLAIM = "claim"
    FRAMING = "framing"


class Place(IntFlag):
    """Where a sentence sits in its answer, for the rules that read it (see :func:`place`)."""

    MIDDLE = 0
    OPENING = 1
    CLOSING = 2


@runtime_checkable
class SentenceClassifier(Protocol):
    """Anything that sorts one sentence into a claim or framing; must never raise.

    A classifier may also read where a sentence sits: coverage calls its
    ``classify_in_answer(sentences, index, cited)`` instead, when it has one (the answer's
    sentences, the one asked about, and the indexes its citations name), as the default's does.
    """

    def classify(self, sentence: str) -> SentenceKind:
        """The kind of ``sentence`` (one sentence, list item or heading of an answer)."""
        ...


# --- normalisation ---------------------------------------------------------------------------

_FOLD = str.maketrans(
    {
        **QUOTE_AND_DASH_FOLDS,
        "`": "`",
        "\u2026": "...",
        "\u2022": "-",
        "\u00b7": "-",
    }
)
# Whitespace, control and invisible characters: one space.
_SPACE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202f\u2060\ufeff]+")
# A dash with a space on either side separates clauses, like a semicolon.
_SPACED_DASH = re.compile(r" -{1,3} | -{2,3}(?=\w)")
# List markers, quote markers and checkboxes in front of a list item.
_LIST_MARK = re.compile(r"(?:[-*+>] |\d{1,3}[.)] |[a-z][.)] |\[[ x]\] )+")
# A markdown heading, or a line that is nothing but bold text (a colon may follow).
_HEADING = re.compile(r"#{1,6} [^.!?;]{1,80}|\*\*[^*.!?:;]{1,80}\*\*:?|__[^_.!?:;]{1,80}__:?")
_EMPHASIS = re.compile(r"\*\*|__")
# What a heading or a list marker can start with (the digits and "a." / "b)" are tested apart).
_HEADING_STARTS = frozenset("#*_")
_LIST_MARK_STARTS = frozenset("-*+>[")
# Emoji, pictographs and their joiners and variation selectors: decoration, never a claim's
# content ("Hi! \U0001f44b", "Good news \U0001f389"). Removed before matching.
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0e\ufe0f\u200d\u20e3]+")
# A Slack shortcode (":computer:"): decoration, like an emoji.
_SHORTCODE = r":[a-z0-9_+-]{1,30}:"
_SHORTCODES = re.compile(_SHORTCODE)
# A sign-off's name line, as written (capitals kept): "Dana from Ledgerly Support", "People
# Team", "Accounts Team, Parcelnest", "Best regards, Customer Success". At most six words, each
# capitalised or a joining word, no digit and no closing punctuation but a comma.
_NAME_WORD = (
    r"(?:[A-Z][^\W\d_]*(?:['\u2019.-][^\W\d_]+)*\.?|&|from|at|of|the|and|for|[-\u2013\u2014])"
)
_CLOSING = (
    r"(?:(?:with )?(?:best|kind|warm|warmest|many|kindest) (?:regards|wishes|thanks)|regards|"
    r"cheers|thanks|thank you|best|sincerely|yours(?: sincerely| truly| faithfully)?|"
    r"all the best|take care)"
)
_SIGNATURE = re.compile(
    r"(?:[\u2013\u2014] ?)?(?:(?i:" + _CLOSING + r"),? )?[A-Z\u00c0-\u00d6\u00d8-\u00de][^\W\d_]*"
    r"(?:['\u2019.-][^\W\d_]+)*\.?"
    r"(?:,? " + _NAME_WORD + r"){0,7},?"
)
# Single capitalised words that are bare answers, not names ("Yes", "Unlimited").
_BARE_ANSWERS = frozenset(
    [
        "yes",
        "no",
        "yep",
        "nope",
        "yeah",
        "none",
        "never",
        "always",
        "true",
        "false",
        "correct",
        "free",
        "included",
        "unlimited",
        "enabled",
        "disabled",
        "required",
        "optional",
        "both",
        "neither",
        "either",
    ]
)
# A letter or digit in any script: without one there is nothing to check.
_WORDY = re.compile(r"[^\W_]")


def _normalise(sentence: str) -> tuple[str, bool]:
    """The sentence folded for matching, and whether it is a heading on its own.

    Each step is skipped where it cannot change the text (a plain ASCII sentence, no dash, no
    markdown): the same result, in a third of the time, for the sentences most answers hold.
    """
    plain = sentence.isascii()
    text = sentence if plain else _EMOJI.sub(" ", sentence).translate(_FOLD)
    if not (plain and text.isprintable() and "  " not in text):
        text = _SPACE.sub(" ", text)
    text = text.strip().casefold()
    if "-" in text:
        text = _SPACED_DASH.sub("; ", text)
    first = text[:1]
    heading = first in _HEADING_STARTS and _HEADING.fullmatch(text) is not None
    if first in _LIST_MARK_STARTS or first.isdigit() or text[1:2] in (".", ")"):
        marker = _LIST_MARK.match(text)
        if marker is not None:
            text = text[marker.end() :]
            heading = False  # a list item states something ("- Kanban board")
    if "**" in text or "__" in text:
        text = _EMPHASIS.sub("", text)
    return text.strip(), heading


# --- the patterns ----------------------------------------------------------------------------
# Matched against the normalised text: casefolded, straight quotes, single spaces, spaced dashes
# as "; ", no bold markers. Every repetition below is over one character class or a bounded
# count, and never nested over alternatives that overlap.

# The rest of a clause: up to the next punctuation mark.
_C = r"[^.,;:!?]*"
# The rest of a clause about what the assistant looked at: it stops at " and" unless only a
# short noun phrase follows ("I checked the pricing page and the FAQ"), so "I checked your
# account and your plan renews on May 1" leaves its claim to be classified.
_C_ACTIVITY = (
    r"(?:(?! and )[^.,;:!?])*(?: and (?:the|a|an|your|our|its|their|my) [^\W\d_]+"
    r"(?: [^\W\d_]+)?(?= ?(?:$|[.,;:!?])))?"
)
# The rest of a clause holding no specifics (digits, prices, code, addresses, menu paths,
# quotations): advice or a wish with one of these carries something to check.
_C_PLAIN = r"[^.,;:!?\d$€£¥%`@/>\"]*"
# A ticket, case or chat reference, casefolded: letters, a dash and digits ("inc-81107",
# "dsr-2025-0419", "sl-88120"), or a number after "#".
_REF = r"(?:[a-z]{2,10}(?:-[a-z]{1,10})*-\d[a-z\d]{0,11}(?:-[a-z\d]{1,12}){0,2}|#\d{3,12})\b"
# What a conversation is filed as ("your report", "your request"): not an order or a refund.
_CONVERSATION = (
    r"(?:report|request|ticket|case|query|question|enquiry|inquiry|message|issue|complaint|"
    r"feedback)"
)
_DETERMINER = r"(?:the|your|our|this|that|these|those|a|an|my|his|her|their|its)"
# A short noun phrase: at most four words, none a preposition ("the back of your card" says
# where on the card), and then the clause ends.
_NOUN_PHRASE = (
    r"(?:(?!(?:of|under|at|on|in|for|to|with|from|by|behind|inside)\b)[^\W\d_][\w'-]* ){0,3}"
    r"[^\W\d_][\w'-]*"
)
_I_AM = r"i(?:'m| am)"
_I_HAVE = r"i(?:'ve| have)?"
_WE_ARE = r"we(?:'re| are)"
_SOURCES = (
    r"(?:documents?|docs|documentation|sources?|articles?|search results?|results|pages?|"
    r"materials?|excerpts?|passages?|snippets?|context|knowledge[- ]?base(?: articles?)?|"
    r"help[- ]?cent(?:er|re)(?: articles?)?|references?|faqs?|guides?)"
)
_RETRIEVAL_SUBJECT = (
    r"(?:(?:the|these|those|my|all the|all of the|some of the|any of the) )?"
    r"(?:[^\W\d_][\w-]* ){0,2}" + _SOURCES + r"(?: (?:that|which))?"
    r" (?:(?:i|we)(?:'ve| have| had)? (?:have|had|found|checked|searched|looked at|looked through|"
    r"can see|could find|could access|can access|was given|were given|retrieved|pulled up|"
    r"have access to|got|read|reviewed)|(?:available to me|in front of me|provided to me))"
)
# Attribution verbs: "the docs I have say X" attributes X, a claim.
_ATTRIBUTES = (
    r"(?:says?|states?|mentions? that|shows?|indicates?|confirms?|notes? that|explains? that|"
    r"lists?|describes? how|specif(?:y|ies)|suggests? that)\b"
)
_ADVICE_LEAD = (
    r"(?:it(?:'s| is) (?:always |usually |generally )?(?:a good idea|a smart idea|a good habit|"
    r"wise|sensible|worth it|worth|best|advisable|helpful|recommended) to|"
    r"it(?:'s| is) (?:always |usually |generally )?worth|"
    r"i(?:'d| would)? (?:strongly )?(?:recommend|suggest|advise)(?: that you)?|"
    r"we (?:strongly )?(?:recommend|suggest|advise)(?: that you)?|"
    r"you (?:may|might) (?:want|wish) to|it (?:can|may|might) help to|personally i(?:'d| would))"
)
# Verbs of generic advice ("keep your receipts", "keeping an eye on ..."); anything more specific
# after an advice lead ("switch the protocol to TCP") is a claim.
_GENERIC_ADVICE = (
    r"(?:review(?:ing)?|check(?:ing)?|double-check(?:ing)?|keep(?:ing)?|monitor(?:ing)?|"
    r"plan(?:ning)?|sav(?:e|ing)|not(?:e|ing)|writ(?:e|ing) down|tak(?:e|ing)|be|being|"
    r"stay(?:ing)?|mak(?:e|ing) sure|look(?:ing)?|watch(?:ing)?|think(?:ing)? about|"
    r"consider(?:ing)?|talk(?:ing)? to|speak(?:ing)? (?:to|with)|ask(?:ing)?|read(?:ing)?|"
    r"bookmark(?:ing)?|hold(?:ing)? on to|get(?:ting)? in touch|hav(?:e|ing)|rais(?:e|ing)|"
    r"run(?:ning)? the numbers|get(?:ting)?|put(?:ting)?|test(?:ing)?|document(?:ing)?)\b"
)
_EMOTION = (
    r"(?:frustrat(?:ing|ed)|overwhelm(?:ing|ed)|confus(?:ing|ed)|stress(?:ful|ed)|"
    r"annoy(?:ing|ed)|worr(?:ying|ied)|upsetting|upset|disappoint(?:ing|ed)|scary|"
    r"nerve-wracking|(?:no|never|not) fun|a (?:hassle|pain)|inconvenient|unsettling|"
    r"disruptive|the worst|stressful|exhausting|worrying)\b"
)
_INTENSIFIER = (
    r"(?:(?:so|very|really|quite|incredibly|understandably|a bit|a little|pretty|extremely|"
    r"super|never|not|always|totally|hugely|genuinely|really quite) )?"
)
_QUESTION_START = (
    r"(?:is|are|was|were|do|does|did|have|has|had|can|could|would|will|should|shall|may|might|"
    r"what|what's|which|when|where|who|whom|whose|why|how|any|anything|want|need|ok|okay|"
    r"right|or|and)\b"
)

# Greetings, thanks and wishes in the languages support answers mix in beside English and the
# German and Spanish of the units below ("Olá Beatriz!", "Dzień dobry Pani Katarzyno, ...",
# "Fijne dag!"): the model cannot call them framing (it knows too few of their words, and
# claims in those languages must stay claims). Matched casefolded: "İyi" folds to "i̇yi".
_FOREIGN_GREETINGS = (
    r"salut|bonsoir|buongiorno|buonasera|salve|ol\u00e1|bom dia|boa (?:tarde|noite)|hoi|"
    r"goedemorgen|goedemiddag|goedenavond|dzie\u0144 dobry|cze\u015b\u0107|witam|"
    r"merhaba|selam|namaste|namaskar|hej|hei|moi|ahoj|sveiki|tere|szia|salam|shalom|"
    r"xin ch\u00e0o|kia ora|servus|moin|gr\u00fc(?:\u00df|ss) gott|gr\u00fcezi"
)
_FOREIGN_THANKS = (
    r"grazie(?: mille| tante)?|dank(?:e sch\u00f6n| je(?: wel)?| u(?: wel)?)|bedankt|"
    r"dzi\u0119kuj\u0119(?: bardzo)?|dzi\u0119ki|te\u015fekk\u00fcr(?:ler| ederim)|"
    r"sa\u011fol(?:un)?|dhanyavaa?d|shukriya|tack(?: s\u00e5 mycket)?|takk|kiitos|"
    r"d\u011bkuji|terima kasih|arigat(?:o|ou|\u014d)(?: gozaimasu)?|cordiali saluti|"
    r"distinti saluti|atenciosamente|abra\u00e7os?|(?:met )?vriendelijke groet(?:en)?|groetjes|"
    r"pozdrawiam|sayg\u0131lar\u0131mla|mvh|hilsen|med v\u00e4nliga h\u00e4lsningar|"
    r"bien cordialement|\u00e0 bient\u00f4t|tschau|ciao ciao|a presto|at\u00e9 logo|tot ziens"
)
_FOREIGN_WISHES = (
    r"bonne (?:journ\u00e9e|soir\u00e9e|semaine|continuation|chance|fin de journ\u00e9e)|"
    r"bon (?:courage|week-end|weekend|voyage)|buona (?:giornata|serata|fortuna|settimana)|"
    r"buon (?:lavoro|viaggio|weekend)|in bocca al lupo|boa sorte|bom trabalho|"
    r"bom fim de semana|boa viagem|fijne (?:dag|avond|week|reis)|veel (?:succes|plezier)|"
    r"prettige dag|powodzenia|mi\u0142ego (?:dnia|wieczoru|weekendu|wyjazdu)|"
    r"i\u0307?yi (?:g\u00fcnler|\u015fanslar|yolculuklar|ak\u015famlar)|kolay gelsin|"
    r"ha en (?:bra|fin|trevlig) (?:dag|helg)|lycka till|ha det bra|"
    r"hyv\u00e4\u00e4 p\u00e4iv\u00e4\u00e4|"
    r"sch\u00f6nen (?:tag|abend)|viel (?:erfolg|spa\u00df|spass|gl\u00fcck)|gute reise|"
    r"buen viaje|buena suerte|feliz d\u00eda"
)

# Framing units that may stand alone. Each must end at a clause boundary.
_STRONG = [
    # greetings and welcomes
    r"(?:hi|hello|hey|hiya|howdy|greetings|good (?:morning|afternoon|evening|day)|morning|"
    r"afternoon|evening|hola|hallo|bonjour|ciao|guten (?:tag|morgen|abend)|buenos d\u00edas|"
    r"buenas|"
    + _FOREIGN_GREETINGS
    + r")(?: again)?(?: (?:mr|mrs|ms|mx|dr|prof|frau|herr|se\u00f1or|se\u00f1ora|sr|sra)"
    r"\.?)?(?: [^\W\d_]+){0,2}",
    r"dear [^.,;:!?]{1,40}",
    r"welcome(?: aboard| back| on board| to the team)?",
    r"welcome (?:to|aboard|back|on board)\b" + _C_PLAIN,
    # thanks
    r"(?:many |big |a big )?(?:thank you|thanks|thx)(?: (?:so|very) much| a lot| a million| a ton|"
    r" heaps| loads|"
    r" everyone| all| folks| both| team|"
    r" again| kindly)?(?: (?:again|too|as well))?(?: for\b" + _C + ")?",
    r"(?:i|we) (?:really |truly |do )?appreciate (?:your|you|it|the|this|that)\b" + _C,
    # apologies
    r"(?:(?:i|we)(?:'m|'re| am| are| was| were) )?(?:so |very |really |truly |terribly )?sorry"
    r"(?: again)?(?: (?:for|about|to hear|to see|to learn)\b"
    + _C
    + r"|(?: that| if)? (?:this|that|it)"
    r" (?:happened|has happened|was (?:the case|confusing|frustrating))|(?: that| if)? i\b"
    + _C
    + ")?",
    r"(?:my |our )?(?:sincere |deepest )?apologies(?: for\b" + _C + ")?",
    r"(?:i|we) (?:sincerely |do )?apologi[sz]e\b" + _C,
    # feelings: "I understand how frustrating this is", "... are never fun"
    r"[^.,;:!?]*?(?:\b(?:is|are|was|were|be|been|being|feel|feels|felt|seem|seems|sound|"
    r"sounds|get|gets|got)|'s|'re|'m) " + _INTENSIFIER + _EMOTION + _C,
    r"(?:[^.,;:!?]*? )?how " + _EMOTION + _C,
    r"(?:what|such) a (?:hassle|pain|nuisance)" + _C,
    # restating the question or the user's situation
    r"you(?:'re| are| were|'ve been| have been) (?:asking|wondering|trying|looking (?:for|to|into)|"
    r"hoping|planning|curious|concerned|worried|unsure|not sure|confused|frustrated|interested|"
    r"thinking|considering|seeing|having (?:trouble|issues|problems|difficulty)|experiencing|"
    r"dealing with|stuck|moving|about to|going to)\b" + _C,
    r"you (?:mentioned|said|asked|noted|described|explained|wrote|told me|reported|indicated|"
    r"shared|want(?:ed)? to know|need to know)\b" + _C,
    r"you(?:'d| would) like to (?:know|find out|understand|check)\b" + _C,
    r"(?:so )?(?:it )?sounds like you\b" + _C,
    r"your question (?:is|was) (?:about|whether|how|what|if|why)\b" + _C,
    r"if i understand (?:you |this |your question )?(?:correctly|right)",
    # questions to the user (a question that starts like one and ends in "?")
    r"(?!did you know\b)" + _QUESTION_START + r"[^.;:!?]*\?",
    # a question that restates the user's situation ("So it connects but then drops?")
    r"(?!did you know\b)[^.:!?\d]*\?",
    r"[^.;:!?]*, (?:right|correct|yes|no|ok|okay)\?",
    # the retrieval and the sources
    _RETRIEVAL_SUBJECT + r"(?! " + _ATTRIBUTES + r")[^.;:!?]*",
    r"(?:none|neither|not one) of (?:the|these|those|my) (?:[^\W\d_]+ )?"
    r"(?:documents|docs|articles|sources|results|pages)\b" + _C,
    r"(?:none|neither) of them (?:covers?|mentions?|says?|address(?:es)?|discuss(?:es)?|answers?|"
    r"describes?|explains?|talks? about|goes into|go into) (?:this|that|it|your|the (?:specific |"
    r"exact )?(?:case|question|issue|situation|scenario))\b" + _C,
    r"there(?:'s| is) no (?:mention|information|info|article|documentation|details?|data)\b"
    r"[^.,;:!?]*? (?:in|from) (?:the|my|these|our) (?:[^\W\d_]+ )?" + _SOURCES + r"\b" + _C,
    r"nothing (?:in|from) (?:the|my|these) (?:[^\W\d_]+ )?" + _SOURCES + r"\b" + _C,
    r"(?:the|my|these|those) (?:[^\W\d_]+ )?" + _SOURCES + r" (?:(?:don't|doesn't|do not|does not)"
    r" (?:mention|say|cover|include|address|discuss|explain|specify|describe|go into|have"
    r" (?:anything|any information|any details|details|info))|(?:has|have) nothing)\b" + _C,
    # what the assistant did, can't do, will do, is
    _I_HAVE + r" (?:just |already |also )?(?:checked|looked|searched|reviewed|read|went through|"
    r"gone through|scanned|consulted|pulled up|dug|browsed|skimmed|double-checked)\b" + _C_ACTIVITY,
    _I_HAVE + r" (?:just |also )?found (?:[^.,;:!?]*? )?(?:" + _SOURCES + r"|mentions?|"
    r"information|info|nothing|anything|something|it)\b" + _C_ACTIVITY,
    _I_AM + r" (?:not |un)able to\b" + _C,
    r"i (?:just |simply |really )?(?:can't|cannot|can not|couldn't|could not|wasn't able to|"
    r"was not able to|was unable to|"
    r"don't|do not|didn't|did not|won't|will not|have no|haven't|have not)\b"
    r"(?! (?:think|believe|recall|remember|expect|suppose)\b)" + _C,
    _I_HAVE + r" (?:just |already )?(?:asked|contacted|chased|reached out to|emailed|messaged|"
    r"pinged|informed|notified|marked|closed|resolved|reopened|"
    r"created|opened|raised|logged|filed|escalated|forwarded|"
    r"passed|submitted|sent|noted|flagged|shared|made a note|reported|added a note)\b"
    # not a "that" clause: "I've noted that refunds take 14 days" states what was noted ("I've
    # passed that on" is a pronoun)
    r"(?![^.,;:!?]*\bthat (?!(?:on|down|to|with|for|up|along|over|in|and)\b))" + _C,
    r"i(?:'ll| will|'d| would| can| could|'m going to| am going to| want to| wanted to)"
    r"(?: be (?:happy|glad) to)?(?: also| now| just| quickly| gladly| first| then| briefly|"
    r" genuinely| really| honestly)?"
    r" (?:help|walk|go|take|break|explain|pass|forward|escalate|check|look|summari[sz]e|list|"
    r"outline|answer|cover|start|keep|try|do my best|show|get back|follow up|send|share|flag|"
    r"note|clarify|point|dig|find|see|search|investigate|update|focus|stick|add|mention|"
    r"highlight|repeat|double-check|ask|leave|continue|give|love|like|be happy|be glad|chase|"
    r"arrange|book|set up|sort|loop in|make sure|be able to|write|email|come back)\b"
    r"(?:[^.,;:!?]|, (?:then|and then|and) )*",
    _I_AM + r" (?:just |only )?(?:an? )?(?:(?:ai|virtual|automated|digital|chat|support) )?"
    r"(?:assistant|bot|chatbot|language model|ai model|ai)\b" + _C,
    _I_AM + r" not (?:a|an|your) [^\W\d_]+(?: [^\W\d_]+)?",
    _I_AM + r" (?:checking|looking|searching|reading|going through|pulling up|here|around|"
    r"keeping|chasing|following|monitoring|watching)\b" + _C,
    r"(?:one|just a) (?:moment|second|sec|minute)\b" + _C,
    r"(?:please )?(?:bear with me|give me a (?:moment|second|sec|minute)|hold on|hang on|"
    r"hang tight)\b" + _C,
    r"let(?:'s| me| us)\b(?:[^.,;:!?]|, (?:then|and then|and) )*",
    # announcing structure
    r"(?:here(?:'s| is| are)|below (?:is|are)|below you'll find|the following|these are|"
    r"following are|see below|as follows)\b(?:[^.;:!?]*:|" + _C + ")",
    r"there(?: are|'re) (?:a (?:few|couple of|number of)|several|many|multiple|two|three|four|some|"
    r"various|different) (?:ways?|options?|things?|approaches|possibilities|steps|reasons|factors|"
    r"scenarios|cases|methods)\b" + _C,
    r"depending on (?:what|which|how|whether|your (?:needs|situation|setup|use case|"
    r"preference))\b" + _C,
    # caveats about the answer itself
    r"(?:this|that|my|the above)(?: (?:answer|summary|response|reply|explanation|information|"
    r"info))? (?:is|isn't|is not|'s not|may|might|could|can't|cannot|doesn't|does not|should|"
    r"won't|shouldn't)\b[^.,;:!?]*?\b(?:advice|a substitute|replace|reflect the (?:latest|current|"
    r"most recent)|accurate|complete|exhaustive|definitive|up to date|up-to-date|binding|"
    r"official|incomplete|general (?:information|guidance))\b" + _C,
    r"(?:(?:this|it)(?:'s| is) )?not (?:legal|financial|medical|tax|professional) advice",
    r"(?:please )?(?:double-check|verify|confirm) (?:this|that|it|with)\b" + _C,
    # offers of help and sign-offs
    r"(?:please |just |do )?(?:let (?:me|us) know|feel free|don't hesitate|do not hesitate|"
    r"reach out|get in touch|give (?:me|us) a shout|ping (?:me|us))\b" + _C,
    r"(?:please |just )?(?:reply|respond|write back|get back to (?:me|us))(?: here| on this"
    r"(?: thread| ticket| email| message| chat)| to this"
    r"(?: message| email| chat| thread)?| back| in this (?:chat|thread)| anytime| any time)\b" + _C,
    r"(?:is there )?anything else\b" + _C,
    r"(?:just |please |simply )?ask(?: away| me| us| anytime| any time)?",
    r"(?:(?:i'm|i am|we're|we are|i'd be|i would be|always|so|very) )?(?:happy|glad|pleased|"
    r"here) to (?:help|assist|answer|explain|clarify|hear|see|know)\b" + _C,
    r"(?:(?:i'm|i am|we're|we are|i'd be|i would be|always) )?(?:happy|glad|pleased) to "
    r"(?!(?:report|confirm|say|announce|share that|tell you that|let you know that)\b)" + _C,
    r"(?:i'm|i am|we're|we are) (?:always )?here (?:for you|if you need)\b" + _C,
    r"(?:i |we )?(?:really |do |so )?hope(?:fully)?\b" + _C_PLAIN,
    r"(?:have|enjoy) (?:a |an )?(?:great|good|nice|lovely|wonderful|fantastic|pleasant|safe|"
    r"relaxing|happy) [^\W\d_]+(?: [^\W\d_]+)?",
    r"enjoy\b" + _C_PLAIN,
    r"(?:take care|stay safe|be safe|stay well|good luck|best of luck|all the best|best wishes|"
    r"(?:best|kind|warm) regards|regards|cheers|bye|goodbye|talk soon|speak soon|see you)\b"
    + _C_PLAIN,
    r"congrat(?:ulation)?s\b" + _C_PLAIN,
    r"(?:happy|merry) [^\W\d_]+",
    r"(?:you're|you are) (?:very |so |most )?welcome\b" + _C_PLAIN,
    r"(?:no problem|no worries|my pleasure|anytime|any time|not at all|glad i could help|"
    r"got it|understood|i see|noted|great|perfect|awesome|wonderful|excellent|fair enough|ok|"
    r"okay|alright|all right)(?: at all| then| about [^.,;:!?]*)?",
    r"(?:that|this|it)(?:'s| is)? (?:a )?(?:great|good|fair|valid|excellent|reasonable|common|"
    r"understandable|interesting) (?:question|point|concern|catch|idea)",
    r"(?:that|this)(?:'s| is)? (?:makes sense|understandable|totally understandable)",
    r"(?:that|this|it) (?:really )?(?:does help|helps)(?: a lot| a great deal)?",
    r"(?:great|good|excellent|fair|interesting|smart) (?:question|point|catch|idea)",
    r"(?:don't|do not) worry(?: about (?:it|that|this))?",
    # generic advice: an advice lead and a generic verb, with nothing specific after it
    _ADVICE_LEAD + r" " + _GENERIC_ADVICE + _C_PLAIN,
    # more thanks, praise and empathy, as support answers phrase them
    r"appreciate (?:you|your|it|the|this|that)\b" + _C,
    r"(?:that's|that is|this is|it's|it is) (?:exactly )?the right (?:instinct|call|thing to do|"
    r"move|place to ask)\b" + _C_PLAIN,
    r"(?:that|this|it) makes (?:it|things|this|my job) (?:much |a lot |so much )?(?:easier|simpler|"
    r"quicker|clearer)\b" + _C_PLAIN,
    r"(?:(?:i|we)(?:'m|'re| am| are) )?(?:so |very |really |truly )?sorry (?:that )?(?:your|the|"
    r"this|that|you|it's|it is|things)\b(?![^.,;:!?]*(?:\bnot\b|n't|\bno\b|\bnever\b))" + _C_PLAIN,
    r"(?:my |our )?(?:sincere |deepest )?apologies (?:that|if)\b" + _C,
    r"it(?:'s| has) been a (?:busy|long|hectic|crazy) (?:week|day|month|few days)\b" + _C_PLAIN,
    r"(?:it's |it is |so |always |really )?(?:good|great|nice|lovely) to (?:hear from|see|meet|"
    r"chat with|help) you(?: again)?",
    r"(?:great|good|excellent|fair|interesting|smart|nice) (?:question|point|catch|idea|one)"
    r"(?: about [^.,;:!?]*)?",
    r"(?:it's|that's|this is|it is|that is) a (?:common|popular|frequent|good|great|fair) "
    r"(?:one|question)\b" + _C_PLAIN,
    r"[^.,;:!?]*(?:comes?|came) up (?:a lot|often|quite often|frequently|all the time)\b",
    r"(?:good|great|some good) news(?= ?(?:!|$))",
    r"fingers crossed\b" + _C_PLAIN,
    r"(?:huge |big |many |hearty |warm |warmest )?congrat(?:ulation)?s\b" + _C_PLAIN,
    r"wishing you\b" + _C_PLAIN,
    r"(?:sincerely yours|viele gr\u00fc(?:\u00df|ss)e|liebe gr\u00fc(?:\u00df|ss)e|"
    r"mit freundlichen gr\u00fc(?:\u00df|ss)en|saludos|un saludo|atentamente|cordialement|"
    r"bien \u00e0 vous|"
    r"que tengas un buen d\u00eda|que disfrutes\b[^.,;:!?]*|suerte con [^.,;:!?]*|hth|"
    r"lmk\b[^.,;:!?]*|obrigad[oa]|gracias|danke)" + _C_PLAIN,
    # thanks and wishes in more languages: a thank-you with no tail of its own ("Merci de
    # noter que la garantie couvre deux ans." states the warranty), a wish with a short one
    # ("Powodzenia z kursem!", "Veel succes with the course!")
    r"(?:merci(?: beaucoup| bien)?(?: (?:pour|de votre|de ta|d'avoir)\b"
    + _C_PLAIN
    + r")?|"
    + _FOREIGN_THANKS
    + r"|(?:"
    + _FOREIGN_WISHES
    + r")(?: (?:with|for|on|in|z|ze|met|com|con|avec|mit|ile|en|na|med|i) [^.,;:!?\d]{1,40})?)",
    r"(?:yours (?:sincerely|truly|faithfully)|(?:with )?(?:kind|warm|warmest|best|kindest) "
    r"(?:regards|wishes)|(?:very )?best wishes)",
    r"have (?:fun|a (?:[^\W\d_]+ )?(?:day|week|weekend|evening|night|morning|afternoon|time|"
    r"trip|holiday|break|one|rest of (?:the|your) (?:day|week|weekend|evening|afternoon)))"
    + _C_PLAIN,
    # steps handed back to the user, and what the assistant can and cannot do
    r"(?:give (?:that|it|this|those) a (?:go|try|shot|whirl)|try (?:that|this|it|those)"
    r"(?: out)?|tell me\b" + _C + r")",
    r"(?:that|this) should (?:do it|do the trick|sort it|fix it)\b" + _C_PLAIN,
    r"what (?:i|we) can do (?:is|here is)\b" + _C_PLAIN,
    r"i can (?:help|answer|assist|point|do that|do this)\b(?:[^.,;:!?]|,(?= ))*",
    _I_AM + r" (?:just |only )?(?:an?|the|your) (?:[^\W\d_]+ ){0,2}(?:assistant|bot|chatbot|"
    r"helper)\b" + _C,
    _I_AM + r" (?:having (?:trouble|difficulty|a hard time)|struggling)\b" + _C,
    _I_HAVE + r" (?:just |also )?(?:added|attached|updated|logged|put|passed on)\b [^.,;:!?]*?"
    r"\b(?:notes?|details|comments?|information|screenshots?|it|them|this|vote|request|"
    r"feedback|name)\b" + _C_PLAIN,
    r"it (?:doesn't|does not) (?:say anything|mention anything)\b" + _C,
    # announcing structure, and hedged summaries of what follows
    _I_HAVE + r" (?:laid out|listed|summari[sz]ed|put together|included|added|outlined|set out|"
    r"broken down|collected|gathered|written up|noted)\b[^.;!?]*? below\b[^.;!?]*",
    r"(?:a |the )?(?:quick |short |brief |full )?(?:summary|overview|rundown|breakdown|answer|"
    r"details|steps|options)(?: is| are)? below",
    r"there(?:'s| is) (?:a|an) (?:simple|quick|easy|straightforward|easier|better) (?:way|fix)"
    r"(?: to (?:do|fix|sort|handle|solve) (?:this|that|it))?",
    r"to answer your question(?: about [^.,;:!?]*)?",
    r"quick question(?: (?:before i answer|first))?",
    r"it (?:all |really )?depends on (?:where|what|which|how|whether|when|who|your)\b" + _C_PLAIN,
    # where to read more, or whom to ask: a pointer that states nothing itself
    r"(?:for (?:the |more |further |full )?(?:full |complete )?(?:details|information|info|"
    r"instructions|steps|story|picture|walkthrough)(?: on [^.,;:!?]*)?,? )?(?:have a look at|"
    r"take a look at|see|check out|head (?:over )?to|visit|read|refer to|look at|dig into) "
    r"(?:our|the|your) " + _C_PLAIN,
    r"(?:our|the|your) (?:[^\W\d_][\w-]* ){0,4}[^\W\d_][\w-]* (?:has|have|covers?|contains?|"
    r"explains?|lists?|goes into) (?:the (?:full|"
    r"complete|whole|rest)|the rest|more|everything|all the details|further details)\b" + _C_PLAIN,
    r"(?:the )?(?:full|complete|whole) (?:text|details|release notes|timeline|list|policy|terms|"
    r"story|walkthrough|guide|breakdown) (?:is|are) (?:in|on|at) (?:our|the) " + _C_PLAIN,
    r"there(?:'s| is) (?:more|a lot more|much more|further (?:detail|details|information|info))"
    r" (?:in|on|at) (?:the|our) " + _C_PLAIN,
    r"(?:your|our|the) (?:[^\W\d_]+ ){0,3}(?:team|manager|representative|rep|contact|"
    r"department|admin|administrator|desk|lead|colleagues?) (?:would be|is|are|will be) "
    r"(?:a good|the best|the right|your best) (?:person|people|contact|place|team|bet|"
    r"point of contact)\b" + _C_PLAIN,
    # generic advice stated as a habit
    r"[^.,;:!?\d]* (?:is|are) (?:a good|a smart|a sensible|good|best) (?:habit|practice|idea)"
    r"(?: anyway)?\b" + _C_PLAIN,
    # acknowledging the request, promising to follow up
    r"(?:i've|we've|i have|we have) (?:received|got) your\b" + _C_PLAIN,
    r"we acknowledge receipt\b" + _C,
    r"got your (?:note|message|email|question|request|ticket)\b" + _C_PLAIN,
    r"(?:we'll|we will|i'll|i will|someone|somebody|they'll|they will|a colleague|the team|"
    r"[^\W\d_]+ from (?:the|our) [^\W\d_]+)(?: [^.,;:!?\d]*?)? (?:be in touch|reach out|get back "
    r"to you|keep you (?:updated|posted|informed|in the loop)|keep this [^.,;:!?]*updated|follow "
    r"up|contact you)\b" + _C_PLAIN,
    # feelings and small talk
    r"i know (?:that's|that is|this is|it's|it is|this isn't|that isn't|it isn't|it's not) "
    r"(?:not )?(?:the answer|what you|easy|fun|simple|ideal)\b" + _C_PLAIN,
    r"i (?:completely |totally |fully |really )?understand why\b" + _C,
    r"what an? (?:stressful|awful|rough|horrible|terrible|annoying|frustrating|lovely|great)\b"
    + _C_PLAIN,
    r"(?:that's|that is|how|so) (?:exciting|great|lovely|wonderful|amazing|awesome|brilliant|"
    r"fantastic|cool|nice|fun)\b" + _C_PLAIN,
    r"[^.,;:!?\d]* sounds? (?:adorable|lovely|great|exciting|fun|amazing|wonderful|like a plan)\b",
    r"(?:love it|nice|ta|lovely|sweet|neat)",
    r"(?:that's|that is) (?:it|all|the lot|the gist)(?: (?:really|for now|there is to it))?",
    r"(?:we'll|we will) get through this\b" + _C_PLAIN,
    r"(?:we're|we are|i'm|i am) (?:really |so )?(?:glad|happy|delighted|thrilled) to have you\b",
    r"(?:feel better soon|get well soon)",
    r"(?:please )?(?:look after|take care of) yourself",
    r"sending (?:[^\W\d_]+ )?(?:lots of |all the )?(?:good|best|warm) (?:wishes|vibes|thoughts)",
    r"(?:we|i) wish you\b" + _C_PLAIN,
    r"you did (?:exactly )?the right thing\b" + _C_PLAIN,
    r"(?:it's|that's|it is) a (?:fair|reasonable|good|sensible|natural) thing to\b" + _C_PLAIN,
    r"(?:and )?one (?:we|i) (?:hear|get|see) (?:a lot|often|quite often)\b" + _C_PLAIN,
    r"lots of (?:people|folks|customers|teams) ask (?:about )?(?:this|that)\b" + _C_PLAIN,
    r"great timing\b" + _C_PLAIN,
    r"(?:an )?easy mistake to make\b",
    r"(?:it's|that's|it is|that is) (?:perfectly|totally|completely) (?:clear|fine|understandable)",
    r"(?:the |an? |that )?[^.,;:!?\d]{0,40} questions?(?= ?(?:!|$))",
    r"(?:please )?run (?:this|it|that) (?:past|by) (?:your|a|an)\b" + _C_PLAIN,
    _I_HAVE + r" (?:only )?got (?:the |a )?[^.,;:!?\d]*(?:guide|docs|documentation|handbook|"
    r"policy|article|faq|wiki)s?(?: here| to hand| in front of me)?",
    r"(?:so )?(?:this|that|it) (?:might|may) not (?:match|apply|be accurate|be complete)\b"
    + _C_PLAIN,
    r"it (?:might|may|would|could) help if you could\b" + _C,
    r"(?:great|good) to be able to\b" + _C_PLAIN,
    # more restating the question
    r"your question (?:is|was)(?= ?:)",
    r"your question (?:concerns|is about|relates to|was about)\b" + _C,
    r"you(?:'d| would) like to\b" + _C,
    r"you want(?:ed)? to\b" + _C,
    # the assistant and what it can say
    r"(?:please )?(?:don't|do not) take (?:this|what i say|my answer|it)\b" + _C,
    r"i(?:'d| would) rather not\b" + _C,
    _I_AM
    + r" (?:honestly |really |just )?not (?:sure|certain) (?:what|why|how|whether|if|which)\b"
    + _C,
    r"(?:that|this) (?:doesn't|does not) (?:necessarily )?mean\b" + _C,
    r"[^.,;:!?\d]* (?:isn't|aren't|is not|are not) something (?:i|we) can (?:answer|help with|"
    r"advise on|comment on)\b" + _C,
    r"(?:and )?(?:neither|none) (?:of them |one )?(?:mentions?|says? anything about|covers?|"
    r"addresses|goes into)\b" + _C,
    r"(?:none|neither) of them (?:says?|mentions?) (?:anything|much)\b" + _C,
    # caveats about the answer
    r"(?:please )?(?:consider|treat|take|read) (?:this|it|that|my answer)(?: only)? as\b"
    + _C_PLAIN,
    r"(?:that's|this is|it's) (?:just |only )?a (?:summary|rough guide|ballpark|rule of thumb)\b"
    + _C_PLAIN,
    r"(?:please )?(?:check|confirm|verify) (?:your own|against your|with your)\b" + _C_PLAIN,
    r"as (?:this|that|it|things) (?:may|might|could) have changed",
    # pointers and whom to ask, in general
    r"you(?:'ll| will) find\b[^.;!?]*? (?:in|on|at) (?:our|the|your)\b" + _C_PLAIN,
    # a link (not one whose text holds a figure: "[Refunds take 14 days](...)")
    r"\[[^\]\d]{1,80}\]\([^)\s]{1,200}\)",
    r"[^.,;:!?\d]*? (?:is|are|would be|might be|could be|'d be|will be) (?:probably |likely |"
    r"also )?"
    r"(?:a good|the best|the right|the friendliest|your best|the person|the people|the team|"
    r"a great)(?: [^\W\d_]+){0,2} (?:person|people|place|team|bet|contact|point of contact|"
    r"folks|start|to ask|to talk to|to start)\b" + _C_PLAIN,
    r"(?:for [^,]{1,60}, )?the best (?:people|person|team|place|contacts?) to (?:ask|talk to|"
    r"contact|start)\b" + _C_PLAIN,
    r"it would be (?:best|wise|a good idea) to (?:put|ask|raise|direct|send|check|talk)\b"
    + _C_PLAIN,
    r"ping (?:me|us|#[\w-]+|@[\w.-]+)\b" + _C_PLAIN,
    r"(?:shout|give (?:me|us) a (?:nudge|shout|ping|call|bell)|come back (?:to me|with)|"
    r"just @ me|drop (?:me|us) a (?:line|note|message))\b" + _C,
    # structure, lead-ins and hedged summaries
    r"it (?:all |really )?(?:hinges|turns) on (?:where|what|which|how|whether|your)\b" + _C_PLAIN,
    r"(?:numbers|details|more|specifics|steps|the rest) below",
    r"there(?:'s| is) (?:a|one) (?:wrinkle|catch|twist|caveat)(?: here)?",
    r"(?:so )?read on",
    r"quick (?:rundown|answer|note|summary|overview|one)(?: on [^.,;:!?\d]*)?(?: for you)?",
    r"to address your (?:concern|question|point)s?(?: directly)?",
    r"[^.,;:!?\d]*depending on (?:those|these|that|this|the) (?:two |few |three )?(?:things|"
    r"factors|points|questions)",
    r"[^.;:!?\d]{1,60}(?=: ?$)",
    r"re:? (?:your )?" + _C_PLAIN,
    r"i understand your question(?= ?:)",
    r"the question (?:is|was) (?:whether|if|how|what|about|why)\b" + _C,
    r"(?:it|these things|this|that) happens?(?: to the best of us| with [^.,;:!?]*)?",
    r"(?:smart|good|wise) (?:move|call|thinking)\b" + _C_PLAIN,
    r"(?:what a |such a )?shame\b" + _C,
    r"(?:so |really )?glad (?:that )?(?:the|your|it|you)\b" + _C_PLAIN,
    r"you(?:'re| are) (?:definitely |certainly |not )?(?:not )?the only one\b" + _C_PLAIN,
    r"keep (?:the|your) (?:ideas|feedback|questions|suggestions) coming",
    r"(?:i )?love (?:this|that|the) (?:question|idea|one)",
    r"(?:your )?mileage (?:may )?var(?:y|ies)",
    r"(?:that|it) comes down to (?:which|what|where|how|whether|your)\b" + _C_PLAIN,
    r"(?:that |it )?(?:genuinely |really |totally )?made my (?:day|morning|week)",
    r"(?:it|that|this) means a lot\b" + _C_PLAIN,
    r"whatever(?:'s| is) (?:easiest|best|works)\b" + _C_PLAIN,
    r"you(?:'ll| will) hear (?:from|back)\b" + _C_PLAIN,
    r"(?:we're|we are|i'm|i am) (?:so |really |very |truly )?grateful\b" + _C,
    r"your (?:message|request|email|ticket|query|question) has been (?:received|logged|passed "
    r"on|forwarded|noted)\b" + _C_PLAIN,
    r"a member of (?:our|the) team will\b" + _C_PLAIN,
    r"[^.,;:!?\d]* will know (?:better|more) than (?:me|i do)",
    r"heads up(?: for [^.,;:!?\d]*)?(?=!)",
    r"it (?:was|'s been|has been) a (?:pleasure|joy)\b" + _C_PLAIN,
    r"more (?:on|in|at) (?:the|our) " + _C_PLAIN,
    r"(?:that|this) (?:should|ought to|will|might) (?:unblock you|get you (?:going|unblocked|"
    r"sorted|started)|sort (?:it|you) out)\b",
    # generic advice
    r"(?:it's|that's|it is) (?:good|best|common) practice\b",
    r"(?:it (?:might|may|could) be worth|try to)\b" + _C_PLAIN,
    # the ticket or case the conversation is filed under: a statement about the conversation
    # ("Your case reference is HB-20443.", "We've logged it as PRV-20817."), not about an
    # account ("Your order reference is ORD-48213.", "We've logged your refund as RF-2231.")
    r"(?:your|the|this) (?:(?:support|case|chat|ticket|conversation|service|help ?desk) )?"
    r"(?:reference|ref|case|ticket|request|incident|chat)(?: (?:number|no\.?|id|reference|ref))?"
    r"(?: for (?:this|today's|our|your) (?:chat|conversation|call|ticket|request|enquiry|inquiry|"
    r"query))? (?:is|was|will be)(?: now)? " + _REF,
    r"(?:i|we)(?:'ve| have)? (?:logged|recorded|registered|opened|raised|filed|created|noted) "
    r"(?:it|this|that|your " + _CONVERSATION + r"|an? (?:ticket|case|request|report|incident))"
    r" (?:as|under|with(?: (?:reference|ref))?) " + _REF,
    r"your " + _CONVERSATION + r" has been (?:logged|recorded|registered|opened|raised|filed|"
    r"created) (?:as|under) " + _REF,
    r"(?:closing|closed|reopening|reopened|escalating|escalated|updating) (?:(?:ticket|case|"
    r"request|incident) )?" + _REF,
    r"(?:ticket|case|request|incident) " + _REF + r" (?:tracks|covers|is tracking) "
    r"(?:it|this|that)",
    r"re:? (?:your )?(?:[^\W\d_]+ ){0,3}" + _REF,
    r"(?:(?:a |quick )?update on )?(?:your )?(?:ticket|case|request|incident) " + _REF + r"(?= ?:)",
    r"(?:an?|the|our) (?:[^\W\d_]+ )?(?:engineer|technician|agent|specialist|colleague|adviser|"
    r"advisor|team|member of (?:the|our) team) (?:has|have) (?:picked (?:it|this) up|been "
    r"(?:notified|assigned|informed|alerted|asked))",
    r"(?:someone|somebody|a colleague|the team|[^\W\d_]+ from (?:the |our )?[^\W\d_]+)"
    r" (?:will|'ll) (?:pick (?:it|this) up|take (?:it|this) from here|take it from there)"
    r"(?: from (?:here|there))?",
    # where to read more, stated as where the details are: a short noun phrase and nothing
    # after it ("Details in the cookie policy."; not "Instructions in the manual say to ...")
    r"(?:(?:the )?(?:more|full|further) )?(?:(?!" + _DETERMINER + r"\b)[^\W\d_]+ )?(?:details?|"
    r"notes|info|information|instructions|specifics|background)(?: (?:are|is|can be found|"
    r"available))? (?:in|on|at) (?:the |our |your )?" + _NOUN_PHRASE,
    r"see also",
    r"(?:the|our|your) (?:[^\W\d_][\w-]* ){0,4}(?:guide|policy|docs|documentation|page|article|"
    r"wiki|faq|handbook|notes|readme) (?:goes|go|walks?)(?: you)? through "
    + _NOUN_PHRASE
    + r"(?: (?:step by step|in (?:more |full |much more |great )?detail))?",
    r"(?:more |further |full )?details? (?:are |is )?available on request",
    # greetings, wishes and service phrases support answers use beside those above
    r"g'day(?: [^\W\d_]+)?|hey there|greetings from(?: [^\W\d_]+){1,4}|no dramas|desculpe",
    r"wishing (?:you|her|him|them|everyone|you both|you all)\b" + _C_PLAIN,
    r"(?:we|i) remain at your (?:service|disposal)\b" + _C_PLAIN,
    # what the assistant was asked, as it restates it
    r"you(?:'ve| have) asked\b" + _C,
    # marketing boilerplate
    r"[^.,;:!?\d]* (?:is|are) (?:a |our )?(?:top|highest|number one|first) priority"
    r"(?: for us)?\b" + _C_PLAIN,
    r"(?:we|i) (?:take|treat) (?:[^\W\d_]+ ){0,4}(?:very |extremely |really |incredibly )?"
    r"seriously\b" + _C,
    r"(?:your )?(?:privacy|security|satisfaction|trust|feedback|business|data protection) "
    r"(?:is|are) (?:very |extremely |really |incredibly )?(?:important|our (?:top |highest |"
    r"number one |first )?priority)\b" + _C,
    r"(?:we|i) (?:value|care about) (?:your|our customers|you)\b" + _C_PLAIN,
    _WE_ARE + r" (?:committed|dedicated) to (?:protecting )?(?:your|our customers'?) (?:privacy|"
    r"security|data|satisfaction|trust|success)\b" + _C_PLAIN,
    _WE_ARE
    + r" (?:constantly |always |continuously )?(?:working|striving) to (?:improve|make)"
    + _C_PLAIN,
]

# Openers that do not stand alone: stripped when something follows, but a sentence that is only
# one of them is a bare answer ("Of course.", "Unfortunately not." is not even matched) and
# stays a claim.
_WEAK = [
    r"(?:of course|sure(?: thing)?|certainly|absolutely|definitely|indeed|unfortunately|sadly|"
    r"yes|yeah|yep|yup|no|nope|again|ooh|oh no|oh|ah|aha|hmm|right|ugh|argh|oof|yikes|aww|aw|"
    r"phew|obviously|personally|in the meantime|meanwhile|short (?:answer|version)|"
    r"long story short|tl;?dr|with that|"
    r"regrettably|fortunately|luckily|thankfully|happily|honestly|frankly|basically|essentially|"
    r"actually|well|so|now|first|firstly|finally|also|in short|"
    r"in summary|to summari[sz]e|to sum up|in a nutshell|in general|generally speaking|overall|"
    r"quick note|note|tip|pro tip|heads up|fyi|for reference|for context|just so you know|"
    r"just to let you know|for what it's worth|good to know|(?:good|great|bad) news|"
    r"(?:just )?to (?:confirm|clarify|recap|be clear|summari[sz]e))",
]

# Prefixes that need no boundary: a hedge, an attribution, a lead-in. Stripped, and what follows
# decides; nothing after them makes the sentence a (bare) claim.
_PREFIXES = [
    r"(?:i|we) (?:think|believe|suppose|guess|assume|expect|reckon|suspect|understand|know|"
    r"can confirm|can see|see|found|noticed|recall|remember|hear)(?: that)?\b",
    _I_AM + r" (?:fairly |pretty |quite |almost |not )?(?:sure|certain|afraid|confident)"
    r"(?: that)?\b",
    r"(?:as far as i (?:know|can tell|understand|'m aware|am aware)|if i (?:remember|recall)"
    r" (?:correctly|right)|if i'm not mistaken|to (?:my|the best of my) knowledge|from what i"
    r" (?:can see|understand|know|can tell)|in my (?:understanding|experience)|i(?:'d| would) say"
    r"|it (?:seems|looks|appears)(?: like| that)?|it(?:'s| is) (?:likely|possible|probable)"
    r" that|probably|likely|perhaps|maybe)\b",
    r"(?:according to|as (?:stated|described|noted|explained|mentioned|outlined|set out|defined|"
    r"specified) (?:in|by|on|under)|per|as per|based on|looking at) [^,;:]{0,120}[,:]",
    r"as far as [^,;:]{0,120} go(?:es)?[,:]",
    r"the (?:good|bad|short|quick|simple) (?:news|answer|version) is(?: that)?\b",
    r"(?:please )?(?:note|keep in mind|bear in mind|remember|be aware)(?: that)?\b",
    # ("did you know ..." is no prefix: the question units must not read its claim as a question)
    r"(?:just so you know|it's worth (?:noting|mentioning|knowing)(?: that)?|fun fact)\b",
    _RETRIEVAL_SUBJECT + r" " + _ATTRIBUTES + r"(?: that)?",
    r"i should (?:say|mention|point out|note|flag)(?: up front| first| now)?(?: that)?\b",
    r"for (?:anything|questions?|everything) (?:about|on|related to) [^,;:]{0,80},",
    # an opening adverb without its comma ("Sadly I can't approve that from here")
    r"(?:sadly|unfortunately|regrettably|fortunately|luckily|thankfully|honestly|again|also|"
    r"obviously|personally|frankly)\b",
    r"i want to be clear\b(?: that)?",
    r"for (?:a|the|any|more|your) [^,;:]{0,80},",
    # a subordinate clause before the main one: the main clause decides
    r"(?:if|when|whenever|once|as soon as|in case|unless|while|since|because|after|before|"
    r"should you|so if)"
    r" [^.,;:!?]{0,200},",
]

_BOUNDARY = r"(?:(?<=[?!:])|(?= ?(?:$|[.,;:!?)\"]| (?:and|but|so|then|or)\b)))"


def _framing(strong: list[str]) -> re.Pattern[str]:
    return re.compile(
        "(?:(?P<strong>" + "|".join(strong) + ")|(?P<weak>" + "|".join(_WEAK) + "))" + _BOUNDARY
    )


# Units that end in a question mark are among the dearest to try and cannot match a text
# without one: each sentence is matched against the units it could hold (the same first match,
# in order, as with all of them; half a microsecond less). Splitting on emotion words too saved
# another half but doubled the expressions to compile (0.1 s more at every start), and a sweep
# classifies few new sentences (5,480 in the 180,419 citations of its benchmark archive).
_NEEDS_QUESTION = [r"\?" in unit for unit in _STRONG]


@functools.cache
def framing_units(question: bool) -> re.Pattern[str]:
    """The framing units a sentence with (or without) a question mark could hold, compiled on
    first use: the two expressions take 0.07 s to compile, which every command would pay at
    start-up, most of them for nothing."""
    return _framing(
        [
            unit
            for unit, needs_question in zip(_STRONG, _NEEDS_QUESTION, strict=True)
            if question or not needs_question
        ]
    )


def _compile_framing_units() -> None:
    """Compile both variants of the framing units now: a classifier is made where it will be
    used, and before a sweep forks its workers, which then share them instead of each
    compiling its own."""
    framing_units(False)
    framing_units(True)


_PREFIX = re.compile("(?:" + "|".join(_PREFIXES) + ") ?")
# What joins units: punctuation, quotes, brackets and connectives.
_GLUE = re.compile(
    r"(?:" + _SHORTCODE + r"|`?@[\w.-]{1,40}`?|\[(?![^\]]{1,80}\]\()|"
    r"[\s.,;:!?()\]\"'*_~\u00a1\u00bf-]|"
    r"(?:and|but|so|then|or|plus|though|although|however|anyway|"
    r"especially|particularly)\b)*"
)


# Openers that answer a question on their own: never a trailing word after framing.
_BARE_WEAK = frozenset(
    ("yes", "yeah", "yep", "yup", "no", "nope", "of course", "sure", "sure thing", "certainly",
     "absolutely", "definitely", "indeed", "right", "unfortunately not", "sadly")
)  # fmt: skip
# One name at the very end, after framing: the person addressed ("..., Fatima.").
_VOCATIVE = re.compile(r"[^\W\d_]+[.!]?")


def _after_comma(joined: str) -> bool:
    """The glue between two units is a comma alone: not the end of a sentence, and no "but"
    ("Sorry, but no." is a bare answer)."""
    return joined.strip() == ","


def _is_vocative(text: str, position: int, joined: str) -> bool:
    """The rest is one name after a comma (not a bare answer after a full stop: "Yes.")."""
    name = _VOCATIVE.fullmatch(text, position)
    if name is None or not _after_comma(joined):
        return False
    return name.group().rstrip(".!") not in _BARE_ANSWERS


def _is_framing(text: str, framing: re.Pattern[str] | None = None) -> bool:
    """Whether framing units, prefixes and glue consume ``text`` entirely (``framing``: the
    units to try; by default those the text could hold)."""
    if framing is None:
        framing = framing_units("?" in text)
    position, end, weak_last, strong, trailing = 0, len(text), True, False, False
    for _ in range(_MAX_UNITS):
        glue = _GLUE.match(text, position)  # always matches, perhaps nothing
        joined = text[position : glue.end()] if glue is not None else ""
        position = glue.end() if glue is not None else position
        if position >= end:
            return not weak_last or trailing
        if strong and _is_vocative(text, position, joined):
            return True  # "Apologies for the delay on this one, Fatima."
        unit = framing.match(text, position)
        if unit is not None:
            weak_last = unit.lastgroup == "weak"
            # a weak word after framing and a comma ("..., unfortunately.") is no bare answer;
            # after a full stop or an exclamation it is ("Great question! No.")
            trailing = (
                weak_last
                and strong
                and _after_comma(joined)
                and unit.group().strip() not in _BARE_WEAK
            )
            strong = strong or not weak_last
        else:
            unit = _PREFIX.match(text, position)
            if unit is None:
                return False
            weak_last = True
        if unit.end() == position:
            return False
        position = unit.end()
    return False


class RuleClassifier:
    """The default classifier: framing recognised by patterns, everything else a claim.

    Stateless and thread-safe; :meth:`classify` never raises and examines at most
    :data:`MAX_CHARS` code points.
    """

    __slots__ = ()

    def __init__(self) -> None:
        _compile_framing_units()

    def classify(self, sentence: str) -> SentenceKind:
        """Claim unless the sentence is recognisably framing (or has nothing in it to check)."""
        return _bounded(_classify, sentence)

    def classify_in_answer(
        self, sentences: Sequence[str], index: int, cited: Collection[int]
    ) -> SentenceKind:
        """:meth:`classify`, knowing where the sentence sits (see :func:`place`)."""
        return _bounded(_classify, *_placed(sentences, index, cited))


class HybridClassifier:
    """The default classifier: the rules, then the learned model on what the rules call claims.

    Stateless and thread-safe; :meth:`classify` never raises and examines at most
    :data:`MAX_CHARS` code points.
    """

    __slots__ = ()

    def __init__(self) -> None:
        # the weights load here, so a broken install fails when the classifier is configured,
        # not on the first sentence
        shipped_model()
        _compile_framing_units()

    def classify(self, sentence: str) -> SentenceKind:
        """Framing if the rules say so, or if the model is sure on words it knows; else a claim."""
        return _bounded(_classify_hybrid, sentence)

    def classify_in_answer(
        self, sentences: Sequence[str], index: int, cited: Collection[int]
    ) -> SentenceKind:
        """:meth:`classify`, knowing where the sentence sits (see :func:`place`)."""
        return _bounded(_classify_hybrid, *_placed(sentences, index, cited))


def _placed(sentences: Sequence[str], index: int, cited: Collection[int]) -> tuple[str, Place]:
    """Sentence ``index`` and its place; an index outside the answer is the caller's bug, refused
    by name (a negative one would read the last sentence as if it opened the answer)."""
    count = len(sentences)
    if not 0 <= index < count:
        raise IndexError(f"sentence {index} of an answer of {count} sentences")
    return sentences[index], place(count, index, cited)


# Answers repeat their framing word for word ("Hope this helps!"): a bounded cache of recent
# sentences (at most _CACHED x MAX_CHARS characters) answers those in a fraction of a
# microsecond.
_CACHED = 4096


def _bounded(
    judge: Callable[[str], SentenceKind], sentence: str, where: Place = Place.MIDDLE
) -> SentenceKind:
    """``judge``'s kind of ``sentence`` as a plain ``str``, or a claim unexamined when it is
    longer than :data:`MAX_CHARS`; a signature or a wish closing the answer (``where``) is
    framing whatever the judge says. The place is read here, above the judge's cache of
    sentences: a sentence is classified once wherever it sits."""
    sentence = _plain(sentence)
    if len(sentence) > MAX_CHARS:
        return SentenceKind.CLAIM
    if where is not Place.MIDDLE and _framing_where(sentence, where):
        return SentenceKind.FRAMING
    return judge(sentence)


@functools.lru_cache(maxsize=_CACHED)
def _framing_where(sentence: str, where: Place) -> bool:
    """Framing by where it sits: a signature or a wish closing the answer."""
    if where in _CLOSING_PLACES and _signs_off(sentence):
        return True
    return where is Place.CLOSING and _wishes(sentence)


def _plain(sentence: str) -> str:
    """The sentence as a plain ``str``: a subclass's own ``__len__``, ``__hash__``, ``lower`` or
    ``translate`` (a plug-in's, a test's) must not lie to the bound or raise in the cache."""
    return sentence if type(sentence) is str else str.__getitem__(sentence, slice(None))


# --- where a sentence sits in its answer ------------------------------------------------------
# A sentence alone cannot tell every signature line from a list item or a table row ("Regards,
# Deepa | InfoSec Helpdesk" against "SSO | Enterprise Only"); its place in the answer helps:
# answers close by signing off, after everything they cite.


# Every place, by opening + 2 * closing (making a flag from an int costs half a microsecond).
_PLACES = (Place.MIDDLE, Place.OPENING, Place.CLOSING, Place.OPENING | Place.CLOSING)
# The places that close an answer, for a test in C: a flag's "&" runs the enum's machinery
# (0.6 us, on every sentence classified).
_CLOSING_PLACES = frozenset((Place.CLOSING, Place.OPENING | Place.CLOSING))
# The first and the last this many sentences are an answer's edges.
_EDGE = 2
# A bot's name behind its emoji ("📦 ShipBot", ":computer: ITBot", "— LoomBot 🤖"):
# only a name ending in "bot" (an emoji before other capitalised words is a list item's
# bullet: "✅ Free Returns").
_BOT_NAME = re.compile(r"(?:[\u2013\u2014] ?)?[A-Za-z]{0,30}[Bb]ot")
# A signature line closing an answer, as written: a closing (in the languages answers close
# in) or a dash, then names, teams and titles joined by separators ("Cheers, Leah @ Coastline
# Mobile", "Un saludo, Diego, Benefits Team", "— Acme IT Service Desk, Tier 1"). Without the
# closing or the dash it is a table row as often ("Visa / Mastercard / Amex"). A word and a
# separator never both take a character, so a line that fails fails in linear time: a hyphen
# joins words unspaced and separates them spaced.
_EDGE_CLOSING = (
    _CLOSING + r"|un saludo|saludos|atentamente|cordialement|dhanyavaa?d|grazie|danke|gracias|"
    r"obrigad[oa]|merci|mit freundlichen gr\u00fc(?:\u00df|ss)en|viele gr\u00fc(?:\u00df|ss)e|"
    r"met vriendelijke groet(?:en)?|(?:hartelijke )?groet(?:en|jes)|abra\u00e7os|beijos|"
    r"cumprimentos|pozdrawiam(?: serdecznie)?|z powa\u017caniem|ng\u0101 mihi|"
    r"(?:med )?v\u00e4nliga? h\u00e4lsning(?:ar)?|h\u00e4lsningar|(?:cordiali|distinti) saluti|"
    r"un abrazo|bien \u00e0 vous|bien cordialement|sch\u00f6ne gr\u00fc(?:\u00df|ss)e"
)
_EDGE_NAME_WORD = (
    r"(?:[a-z]{1,3}-)?[A-Z\u00c0-\u00d6\u00d8-\u00de][^\W_]*(?:['\u2019.-][^\W_]+)*\.?|&|from|"
    r"at|of|the|and|for|de|von|van|(?:(?<=Tier )|(?<=Level )|(?<=Line ))\d{1,2}"
)
_EDGE_SIGNATURE = re.compile(
    r"(?:[\u2013\u2014] ?|(?i:" + _EDGE_CLOSING + r"),? )(?:" + _EDGE_NAME_WORD + r")"
    r"(?:(?: [\u2013\u2014-] | ?[|@/\u00b7] ?|, | )(?:" + _EDGE_NAME_WORD + r")){0,11},?"
)


def _is_signature(sentence: str) -> bool:
    """A sign-off's name line: a few capitalised words, not a bare answer ("Yes"), or a bot's
    name behind its emoji."""
    raw = _signature_line(sentence)
    if raw is None:
        return False
    if _SIGNATURE.fullmatch(raw) is not None:
        return True
    bare = _undecorated(raw)
    return bare != raw and _BOT_NAME.fullmatch(bare) is not None


# A short exclamation of wishes closing an answer, in the languages answers close in ("Gute
# Fahrt!", "Sweet dreams!", "Boas pedaladas!"): a wish word first, at most four words, no
# figure, nothing that states ("Have free shipping!"). Only wish words: a short exclamation
# answers as often ("Envío gratis!", "Nein!", "Zero fees!").
_WISH = re.compile(r"\W*[^\W\d_]+(?:\W+[^\W\d_]+){0,3}\s*!+\W*")
_WISH_WORDS = re.compile(
    r"(?:have|enjoy|good|safe|happy|merry|stay|sweet|fair|best|see|talk|catch|speak|until|"
    r"thanks|thank|cheers|pozdrawiam|"
    r"congrats|congratulations|bon|bonne|bonnes|bons|\u00e0|au|gute|guten|gutes|sch\u00f6ne[nrs]?|"
    r"viel|frohe[ns]?|bis|boa|boas|bom|at\u00e9|feliz|felices|buen|buena|buenas|buenos|hasta|"
    r"buon|buona|buone|fijne|fijn|prettige|veel|tot|mukavaa|hyv\u00e4\u00e4|trevlig|trevligt|"
    r"lycka|mi\u0142ego|powodzenia|udanego|dobrego|smacznego)\b"
)
_WISH_CHARS = 80
_STATES = re.compile(
    r"\b(?:is|are|was|were|it's|that's|there's|they're|you're|we're|free|gratis|no|not|zero|"
    r"only)\b"
)


def _wishes(sentence: str) -> bool:
    """A closing wish: a short exclamation of a wish word that states nothing."""
    raw = sentence.strip()
    if len(raw) > _WISH_CHARS:
        return False
    raw = _undecorated(raw)
    if _WISH.fullmatch(raw) is None:
        return False
    text, _ = _normalise(raw)
    return _WISH_WORDS.match(text) is not None and _STATES.search(text) is None


def _signs_off(sentence: str) -> bool:
    """A longer signature line, as answers close with it: after a closing or a dash, with
    separators and a team ("Regards, Deepa | InfoSec Helpdesk")."""
    raw = _signature_line(sentence)
    return raw is not None and _EDGE_SIGNATURE.fullmatch(_undecorated(raw)) is not None


def _signature_line(sentence: str) -> str | None:
    """The sentence stripped, if it may be a signature line at all: short, without a full
    stop at its end, not a bare answer."""
    raw = sentence.strip()
    if len(raw) > 80 or raw.endswith(".") or raw.rstrip(",").casefold() in _BARE_ANSWERS:
        return None
    return raw


def _undecorated(raw: str) -> str:
    """``raw`` without its emoji and Slack shortcodes."""
    bare = raw if raw.isascii() else _SPACE.sub(" ", _EMOJI.sub(" ", raw)).strip()
    if ":" in bare:
        bare = _SPACE.sub(" ", _SHORTCODES.sub(" ", bare)).strip()
    return bare


def place(count: int, index: int, cited: Collection[int]) -> Place:
    """Where sentence ``index`` of an answer of ``count`` sentences sits, given the indexes of
    its cited sentences: opening (one of the first two, no cited sentence before it), closing
    (one of the last two, no cited sentence after it), both or neither."""
    if _EDGE <= index < count - _EDGE:  # most sentences: the middle, nothing to look at
        return Place.MIDDLE
    opening = index < _EDGE and (not cited or min(cited) >= index)
    closing = index >= count - _EDGE and (not cited or max(cited) <= index)
    return _PLACES[opening + 2 * closing]


@functools.lru_cache(maxsize=_CACHED)
def _classify(sentence: str) -> SentenceKind:
    text, heading = _normalise(sentence)
    if _WORDY.search(text) is None or heading or _is_signature(sentence):
        return SentenceKind.FRAMING
    return SentenceKind.FRAMING if _is_framing(text) else SentenceKind.CLAIM


@functools.lru_cache(maxsize=_CACHED)
def _classify_hybrid(sentence: str) -> SentenceKind:
    if _classify(sentence) is SentenceKind.FRAMING:
        return SentenceKind.FRAMING
    if not _is_bare_answer(sentence) and shipped_model().is_framing(sentence):
        return SentenceKind.FRAMING
    return SentenceKind.CLAIM


def _is_bare_answer(sentence: str) -> bool:
    """A short answer ("Yes!", "Nope!", "Totally free!", "Fully covered!"): the model has
    learned that an exclamation mark is framing ("Thanks!", "Happy cycling!") and must not
    overrule a sentence of at most four words that holds a word that answers."""
    if len(sentence) > _SHORT_ANSWER_CHARS:
        return False
    if _BARE_ANSWER.fullmatch(sentence) is not None:
        return True
    if len(sentence.split()) > _SHORT_ANSWER_WORDS:
        return False
    return any(word in _ANSWER_WORDS for word in _ANSWER_WORD_SPLIT.findall(sentence.casefold()))


# A bare answer, with its punctuation and emoji around it.
_BARE_ANSWER = re.compile(r"[\W_]{0,8}(?i:" + "|".join(sorted(_BARE_ANSWERS)) + r")[\W_]{0,8}")
_SHORT_ANSWER_CHARS = 60
_SHORT_ANSWER_WORDS = 4
_ANSWER_WORD_SPLIT = re.compile(r"[^\W\d_]+")
# The words of a short answer: what is or is not included, allowed, charged (bare answers but
# "yes" and "no", which open framing as often: "No worries!", "Yes, happy to help!").
_ANSWER_WORDS = (
    _BARE_ANSWERS
    - {"yes", "no", "yeah", "yep", "nope", "both", "either", "neither", "never", "always", "true",
       "false", "correct", "none"}
) | {
    "covered", "allowed", "available", "permitted", "refundable", "gratis", "gratuit",
    "gratuite", "kostenlos", "zero", "waterproof", "supported", "unsupported", "excluded",
    "mandatory",
}  # fmt: skip


# --- configuration ---------------------------------------------------------------------------


def load_classifier(spec: str) -> SentenceClassifier:
    """The classifier a setting names: ``"hybrid"``, ``"rules"`` or ``"module.path:attribute"``.

    The attribute may be a class or a zero-argument factory (called), or an object with a
    ``classify`` method (used as is). Raises :class:`~exporter.errors.SettingsError` naming the
    spec and what is wrong, in one short line, whatever the plug-in does while it is imported,
    looked up or called: raises anything, or exits (a ``SystemExit`` would otherwise end the
    process with the plug-in's status, silently: a sweep gate passing, or failing, on nothing).
    Only ``KeyboardInterrupt`` goes through.
    """
    name = spec.strip()
    if name.casefold() == "hybrid":
        try:
            return HybridClassifier()
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged install
            raise _spec_error(spec, f"its model cannot be loaded: {_raised(exc)}") from exc
    if name.casefold() == "rules":
        return RuleClassifier()
    module_name, colon, attribute = name.partition(":")
    if not colon or not module_name or not attribute:
        raise _spec_error(spec, "expected 'hybrid', 'rules' or 'module.path:attribute'")
    if module_name.startswith("."):
        raise _spec_error(spec, "a relative module name cannot be imported; give its full path")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise _spec_error(spec, f"module {preview(module_name)} not found") from exc
        raise _spec_error(
            spec, f"importing {preview(module_name)} failed: {preview(str(exc))}"
        ) from exc
    except (Exception, SystemExit) as exc:  # whatever the module does while it is imported
        raise _spec_error(spec, f"importing {preview(module_name)} failed: {_raised(exc)}") from exc
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise _spec_error(
                spec, f"module {preview(module_name)} has no attribute {preview(attribute)}"
            ) from exc
        except (Exception, SystemExit) as exc:  # a module's __getattr__ may do anything
            raise _spec_error(
                spec, f"looking up {preview(attribute)} failed: {_raised(exc)}"
            ) from exc
    try:
        if isinstance(target, type) or (not _has_classify(target) and callable(target)):
            target = target()
        usable = _has_classify(target)
    except (Exception, SystemExit) as exc:
        raise _spec_error(spec, f"calling {preview(attribute)} failed: {_raised(exc)}") from exc
    if not usable:
        raise _spec_error(spec, f"{preview(attribute)} has no classify method")
    return cast(SentenceClassifier, target)


def _has_classify(candidate: object) -> bool:
    return callable(getattr(candidate, "classify", None))


def _raised(exc: BaseException) -> str:
    """An exception a plug-in raised, as ``Type('message')``, short and on one line."""
    return preview(exc)


def _spec_error(spec: str, problem: str) -> SettingsError:
    return SettingsError(bounded(f"classifier {preview(spec)}: {problem}"))
