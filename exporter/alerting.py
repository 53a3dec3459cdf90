"""Every alerting knob, in one place: the thresholds and durations of the rules, the lines on
the board, and the lines ``citation-exporter demo`` compares against. Change a value here, then
run ``python -m mixin`` to regenerate rules/ and grafana/ (a test fails while they disagree).
"""

from __future__ import annotations

# The Prometheus job that scrapes the exporter (meta-monitoring selects on it).
JOB = "citation-drift-exporter"
JOB_SELECTOR = f'job="{JOB}"'

# Where the runbooks live: docs/runbooks.md, one heading per alert (rendered on GitHub and on
# the documentation site alike, with the same anchor).
RUNBOOK_BASE = (
    "https://github.com/citation-drift-exporter/citation-drift-exporter/blob/main/docs/runbooks.md"
)

# Inline drift ratio (drift failures / checks, 15 minutes) that pages on-call. Drift from a
# healthy pipeline runs at about BASELINE; a chunker or parser fault moves it far above.
DRIFT_RATIO_PAGE = 0.02
DRIFT_RATIO_BASELINE = 0.003
DRIFT_FOR = "15m"

# Drift ratio of the last completed sweep (the post-re-index check) that pages.
SWEEP_DRIFT_RATIO_PAGE = 0.01

# Share of the last completed sweep's citations whose document is gone from the live store that
# pages, at the drift sweep's line. A page, not a ticket: a citation to a vanished document is as
# broken for a reader as a drifted one (the answer shows a source that opens nothing), and a
# re-index that loses documents (a failed partition, a crawler that stopped early, a filter
# that matched too much) is a deploy fault to roll back now, before answers built on the new
# store pile up. Deleting documents on purpose seldom takes 1% of everything cited at once;
# when it does, it is planned, and its window is silenced like any planned change.
SWEEP_MISSING_RATIO_PAGE = 0.01

# Superseded ratio that opens a ticket: documents were reissued (a content refresh). Never pages.
SUPERSEDED_RATIO_TICKET = 0.10
SUPERSEDED_FOR = "5m"

# Traffic guard: below this many inline checks per second (averaged over 15 minutes) a ratio is
# noise; 0.1/s is 90 checks in the window, so 1 failure in 10 checks at night cannot page.
MIN_CHECKS_PER_SECOND = 0.1

# Share of consumed messages dead-lettered (15 minutes) that opens a ticket.
INVALID_EVENTS_RATIO = 0.01

# Coverage: the inline share of claim sentences that no citation supports (uncited claims /
# claim sentences, over MixinConfig.coverage_window, 1 hour) that opens a ticket. A generator
# that cites as instructed leaves few claims uncited (some framing the classifier calls a claim
# shows up as an uncited claim, so the floor is not 0); a model or prompt change that stops
# citing moves it far above; one topic whose retrieval returns nothing adds that topic's share
# of the claims. A ticket, never a page: coverage moves with model and prompt deploys, not
# minute by minute.
UNCITED_CLAIMS_RATIO_TICKET = 0.10
# The hourly ratio already smooths; a further hour above the line says the change is live and
# stays (not a canary rolled back), and a ticket loses nothing by waiting for it.
UNCITED_CLAIMS_FOR = "1h"
# Traffic guard of the coverage ticket: below this many inline claim sentences per second
# (averaged over the window) the share is noise. 0.05/s is 180 claim sentences in the hour, so
# at night a handful of answers (say 4 uncited of 20 claims) cannot open a ticket.
MIN_CLAIMS_PER_SECOND = 0.05

# Entailment (a judge decides whether a citation's evidence establishes its claim). A judge errs,
# the model judge about 6 times in 10 on conditional language, so no alert reads a judge's
# verdicts: the not-entailed ratio is on the board only. The two tickets below watch the judge
# itself, never what it decided.
#
# Share of the model judge's inline calls (results entailed, not_entailed, unknown and error;
# skipped samples called nothing) that came to `error` over MixinConfig.rate_window (15 minutes)
# that opens a ticket. The judge retries within its deadline, so a healthy endpoint should leave
# only the odd timeout or unusable reply, a few percent at most; an endpoint that is down, a
# wrong model name or a rotated key make every call an error, and rate limits that outlast the
# retries a large share. 20% is far above the first and far below the others.
JUDGE_ERRORS_RATIO_TICKET = 0.20
# An endpoint restart or a short burst of 429s passes within minutes; a quarter of an hour above
# the line is a fault that stays, and a ticket loses nothing by waiting for it.
JUDGE_ERRORS_FOR = "15m"
# Traffic guard of the judge-errors ticket: below this many inline model-judge calls per second
# (averaged over the window) the share is noise. 0.02/s is 18 calls in 15 minutes, so two errors
# among a handful of calls at night cannot open a ticket. At the 1% sample rate it takes about
# 2 inline checks a second to pass it (the lexical judge settles a few of the samples).
MIN_JUDGE_CALLS_PER_SECOND = 0.02
# The hourly budget (judge_budget_usd_per_hour) is spent once samples are dropped for reason
# `budget`: from then to the end of the hour every sample is dropped, so judging has stopped.
# The alert reads drops over MixinConfig.judge_drops_window (5 minutes: it clears within minutes
# of the hour's reset, when judging resumes); holding this long means the drops went on for
# 5 minutes or more, so a budget spent in the hour's last minutes (a handful of samples lost)
# opens no ticket, one spent earlier does, each hour it happens.
JUDGE_BUDGET_FOR = "10m"

# Meta-monitoring.
EXPORTER_DOWN_FOR = "5m"
EXPORTER_ABSENT_FOR = "15m"
NOT_READY_FOR = "15m"
STALLED_FOR = "10m"
# A re-index (new chunker fingerprint) without a completed sweep after this long is a ticket.
SWEEP_OVERDUE_SECONDS = 3600


def runbook(alert: str) -> str:
    """The anchor of an alert's runbook (GitHub and MkDocs both lower-case heading text)."""
    return f"{RUNBOOK_BASE}#{alert.lower()}"
