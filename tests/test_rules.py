"""The shipped rules: up to date, valid for promtool, unit-tested, and documented; the mixin's
config, and the rules it renders for another deployment, checked by promtool too."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_support import ANOTHER_DEPLOYMENT, render_mixin, series_names, series_selectors

from exporter import alerting
from mixin.config import DEFAULT, ConfigError, MixinConfig, load_config

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "rules" / "citation-drift.rules.yml"

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (scripts/test installs Debian's prometheus package)",
)


def _rules(path: Path = RULES) -> list[dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def another(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixin rendered by `python -m mixin --config` for another deployment."""
    return render_mixin(tmp_path_factory.mktemp("another"), ANOTHER_DEPLOYMENT)


def test_generated_files_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mixin", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_check_names_a_stale_file(another: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(another, out)
    manifest = out / "deploy" / "kubernetes" / "citation-drift-exporter.yaml"
    manifest.write_text(manifest.read_text().replace("replicas: 1", "replicas: 3"))
    config = tmp_path / "config.toml"
    config.write_text(ANOTHER_DEPLOYMENT)
    command = [sys.executable, "-m", "mixin", "--config", str(config), "--out", str(out)]
    done = subprocess.run(
        [*command, "--check"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert "deploy/kubernetes/citation-drift-exporter.yaml" in done.stderr
    assert "rules/citation-drift.rules.yml" not in done.stderr


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    done = _promtool("test", "rules", "citation-drift.test.yml", cwd=REPO / "rules" / "tests")
    assert done.returncode == 0, done.stdout + done.stderr


def test_recording_rules_are_named_level_metric_operations() -> None:
    records = [r["record"] for r in _rules() if "record" in r]
    assert records == [
        "instance:citation_checks:rate15m",
        "instance:citation_drift_failures:rate15m",
        "instance:citation_superseded_failures:rate15m",
        "job:citation_checks:rate15m",
        "job:citation_drift_failures:rate15m",
        "job:citation_superseded_failures:rate15m",
        "job:citation_drift_failures_per_check:ratio_rate15m",
        "job:citation_superseded_failures_per_check:ratio_rate15m",
        "job:citation_sweep_drift_failures_per_citation:ratio",
        "job:citation_sweep_document_missing_per_citation:ratio",
        "instance:citation_answer_claim_sentences:rate1h",
        "instance:citation_uncited_claims:rate1h",
        "job:citation_answer_claim_sentences:rate1h",
        "job:citation_uncited_claims:rate1h",
        "job:citation_uncited_claims_per_claim:ratio_rate1h",
        "instance:citation_entailment_judged:rate1h",
        "instance:citation_entailment_not_entailed:rate1h",
        "job:citation_entailment_judged:rate1h",
        "job:citation_entailment_not_entailed:rate1h",
        "job:citation_entailment_not_entailed_per_judged:ratio_rate1h",
    ]
    for rule in _rules():
        if "record" in rule:
            # the level names the finest label an aggregation keeps
            level = rule["record"].split(":")[0]
            for labels in re.findall(r"\bby \(([^)]*)\)", rule["expr"]):
                assert labels.split(", ")[-1] == level, rule


def test_every_series_selector_in_the_rules_selects_the_job() -> None:
    names = series_names(yaml.safe_load(RULES.read_text()))
    for rule in _rules():
        selectors = series_selectors(rule["expr"], names)
        assert selectors, rule
        for metric, matchers in selectors:
            assert f'job="{alerting.JOB}"' in matchers, f"{rule}: {metric} without the job"


def test_every_alert_has_severity_summary_description_and_a_runbook_of_its_own() -> None:
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    anchors = {heading.strip().lower() for heading in re.findall(r"^## (.+)$", runbooks, re.M)}
    alerts = [r for r in _rules() if "alert" in r]
    assert {a["alert"] for a in alerts} == {
        "CitationDriftRateHigh",
        "CitationSweepDriftHigh",
        "CitationSweepDocumentsMissing",
        "CitationContentRefreshDetected",
        "CitationExporterDown",
        "CitationExporterAbsent",
        "CitationExporterNotReady",
        "CitationExporterStalled",
        "CitationInvalidEventsHigh",
        "CitationUnreadableMessages",
        "CitationNoSweepSinceChunkerChange",
        "CitationUncitedClaimsHigh",
        "CitationJudgeErrorsHigh",
        "CitationJudgeBudgetExhausted",
    }
    for alert in alerts:
        labels, annotations = alert["labels"], alert["annotations"]
        assert labels["severity"] in ("critical", "warning")
        assert "{{" not in annotations["summary"]
        assert "{{" in annotations["description"]
        runbook = annotations["runbook_url"]
        assert runbook == alerting.runbook(alert["alert"]) == DEFAULT.runbook(alert["alert"])
        assert str(alert["alert"]).lower() in anchors, f"no runbook for {alert}"


def test_the_runbooks_table_lists_every_alert_with_its_severity_and_summary() -> None:
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    rows = re.findall(r"^\| \[(\w+)\]\(#(\w+)\) \| (\w+) \| (.+) \|$", runbooks, re.M)
    alerts = [r for r in _rules() if "alert" in r]
    assert rows == [
        (a["alert"], a["alert"].lower(), a["labels"]["severity"], a["annotations"]["summary"])
        for a in alerts
    ]


def test_only_what_readers_see_broken_pages() -> None:
    """Drift, and a sweep that found cited documents gone; never a refresh, coverage or judge."""
    critical = {r["alert"] for r in _rules() if r.get("labels", {}).get("severity") == "critical"}
    assert critical == {
        "CitationDriftRateHigh",
        "CitationSweepDriftHigh",
        "CitationSweepDocumentsMissing",
    }


# --- the config ---------------------------------------------------------------------------


def test_the_coverage_ratio_sums_claims_and_uncited_claims_before_dividing() -> None:
    rules = {r.get("record") or r["alert"]: r for r in _rules()}
    claims = rules["instance:citation_answer_claim_sentences:rate1h"]["expr"]
    assert 'citation_answer_sentences_total{mode="inline", kind="claim", ' in claims
    assert "[1h]" in claims
    uncited = rules["instance:citation_uncited_claims:rate1h"]["expr"]
    assert 'citation_uncited_claims_total{mode="inline", ' in uncited and "[1h]" in uncited
    assert "by (job, instance)" in uncited, "summed over the topics"
    ratio = rules["job:citation_uncited_claims_per_claim:ratio_rate1h"]["expr"]
    assert ratio.split("\n/\n") == [
        f'job:citation_uncited_claims:rate1h{{job="{alerting.JOB}"}}',
        f'job:citation_answer_claim_sentences:rate1h{{job="{alerting.JOB}"}}',
    ]
    alert = rules["CitationUncitedClaimsHigh"]
    assert alert["labels"] == {"severity": "warning"}, "a ticket, never a page"
    assert alert["for"] == alerting.UNCITED_CLAIMS_FOR == DEFAULT.coverage_for
    assert f"> {alerting.UNCITED_CLAIMS_RATIO_TICKET}" in alert["expr"]
    assert f"> {alerting.MIN_CLAIMS_PER_SECOND}" in alert["expr"], "the traffic guard"


def test_the_not_entailed_ratio_counts_judged_citations_and_no_alert_reads_it() -> None:
    """Judged is entailed, not_entailed or unknown, across judges; error and skipped judged
    nothing. A judge errs, so no alert reads a verdict: not the ratio, not not_entailed."""
    rules = {r.get("record") or r["alert"]: r for r in _rules()}
    judged = rules["instance:citation_entailment_judged:rate1h"]["expr"]
    assert (
        'citation_entailment_checks_total{mode="inline", result=~"entailed|not_entailed|unknown", '
        in judged
    )
    assert "judge=" not in judged and "[1h]" in judged
    not_entailed = rules["instance:citation_entailment_not_entailed:rate1h"]["expr"]
    assert 'citation_entailment_checks_total{mode="inline", result="not_entailed", ' in not_entailed
    assert "judge=" not in not_entailed, "across judges"
    ratio = rules["job:citation_entailment_not_entailed_per_judged:ratio_rate1h"]["expr"]
    assert ratio.split("\n/\n") == [
        f'job:citation_entailment_not_entailed:rate1h{{job="{alerting.JOB}"}}',
        f'job:citation_entailment_judged:rate1h{{job="{alerting.JOB}"}}',
    ]
    records = [r["record"] for r in _rules() if "citation_entailment" in r.get("record", "")]
    assert len(records) == 5
    for rule in _rules():
        if "alert" in rule:
            # not the recorded ratio nor its parts, nor a verdict by itself (the model judge's
            # calls, whatever their result, are CitationJudgeErrorsHigh's denominator)
            assert not [name for name in records if name in rule["expr"]], rule
            assert 'result="not_entailed"' not in rule["expr"], rule
            assert 'result=~"not_entailed' not in rule["expr"], rule


def test_the_judges_alerts_are_tickets_on_the_judge_not_on_its_verdicts() -> None:
    rules = {r["alert"]: r for r in _rules() if "alert" in r}
    errors = rules["CitationJudgeErrorsHigh"]
    assert errors["labels"] == {"severity": "warning"}, "a ticket, never a page"
    assert errors["for"] == alerting.JUDGE_ERRORS_FOR == DEFAULT.judge_errors_for
    numerator, denominator = errors["expr"].split("\n> ")[0].split("\n/\n")
    assert 'mode="inline", judge="openai", result="error", ' in numerator
    # a skipped sample called nothing: not in the calls
    calls = 'mode="inline", judge="openai", result=~"entailed|not_entailed|unknown|error", '
    assert calls in denominator and "[15m]" in denominator
    assert f"> {alerting.JUDGE_ERRORS_RATIO_TICKET}\n" in errors["expr"]
    assert errors["expr"].endswith(f"> {alerting.MIN_JUDGE_CALLS_PER_SECOND}"), "traffic guard"
    budget = rules["CitationJudgeBudgetExhausted"]
    assert budget["labels"] == {"severity": "warning"}
    assert budget["for"] == alerting.JUDGE_BUDGET_FOR == DEFAULT.judge_budget_for
    assert budget["expr"] == (
        "sum by (job) (increase(citation_entailment_dropped_total"
        f'{{reason="budget", job="{alerting.JOB}"}}[5m])) > 0'
    )


def test_a_toml_and_a_yaml_config_say_the_same(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text(ANOTHER_DEPLOYMENT)
    yml = tmp_path / "c.yaml"
    yml.write_text(
        "job: citations-prod\naggregation_labels: [namespace]\n"
        "runbook_url: 'https://runbooks.example.com/citations/{alert}'\n"
        "rate_window: 30m\ndrift_for: 10m\nnamespace: rag\n"
        "operator_labels: {release: kube-prometheus-stack}\ndashboard_uid: citations-prod\n"
    )
    config = load_config(toml)
    assert config == load_config(yml)
    assert config.job == "citations-prod" and config.aggregation_labels == ("namespace",)
    assert config.by("topic") == "(namespace, job, topic)"
    assert config.runbook("CitationExporterDown").endswith("/citations/CitationExporterDown")
    assert config.stall_window == DEFAULT.stall_window  # a key left out keeps its default


def test_the_defaults_are_todays_behaviour() -> None:
    assert DEFAULT.selector == 'job="citation-drift-exporter"' == f'job="{alerting.JOB}"'
    assert DEFAULT.by() == "(job)"
    assert DEFAULT.drift_for == alerting.DRIFT_FOR


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param('jbo = "x"', "'jbo'", id="unknown-key"),
        pytest.param("job = 3", "job: expected a string", id="wrong-type"),
        pytest.param('job = "Citations_Prod"', "job: 'Citations_Prod' must be", id="not-dns"),
        pytest.param('aggregation_labels = "namespace"', "aggregation_labels", id="not-a-list"),
        pytest.param('aggregation_labels = ["instance"]', "aggregation_labels", id="reserved"),
        pytest.param('rate_window = "90s"', "rate_window", id="not-whole-minutes"),
        pytest.param('drift_for = "soon"', "drift_for", id="not-a-duration"),
        pytest.param('coverage_window = "90s"', "coverage_window", id="coverage-window"),
        pytest.param('coverage_for = "1d2"', "coverage_for", id="coverage-for"),
        pytest.param('entailment_window = "30s"', "entailment_window", id="entailment-window"),
        pytest.param('judge_drops_window = "5"', "judge_drops_window", id="judge-drops-window"),
        pytest.param('judge_errors_for = "0m"', "judge_errors_for", id="judge-errors-for"),
        pytest.param("judge_budget_for = 10", "judge_budget_for: expected a string", id="budget"),
        pytest.param('runbook_url = "https://x/{name}"', "runbook_url", id="bad-placeholder"),
        pytest.param("job = ", "mixin-config.toml", id="not-toml"),
    ],
)
def test_a_bad_config_is_an_error_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "mixin-config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_config(path)
    done = subprocess.run(
        [sys.executable, "-m", "mixin", "--config", str(path), "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and named in done.stderr
    assert not (tmp_path / "out").exists(), "nothing is written for a bad config"


def test_the_docs_example_config_loads(tmp_path: Path) -> None:
    page = (REPO / "docs" / "alerts.md").read_text()
    section = page[page.index("## Configuring the mixin") :]
    example = section[section.index("```toml\n") + 8 : section.index("```\n", 1)]
    path = tmp_path / "example.toml"
    path.write_text(example)
    config = load_config(path)
    assert config.job == "citations-prod" and config.aggregation_labels == ("namespace",)


def test_every_setting_has_a_comment_saying_why() -> None:
    source = (REPO / "mixin" / "config.py").read_text().splitlines()
    for name in MixinConfig.__dataclass_fields__:
        line = next(i for i, text in enumerate(source) if text.startswith(f"    {name}: "))
        commented = "#" in source[line] or source[line - 1].strip().startswith("#")
        assert commented, f"{name} has no comment"


# --- another deployment --------------------------------------------------------------------


@needs_promtool
def test_promtool_checks_and_tests_the_rules_of_another_deployment(another: Path) -> None:
    checked = _promtool("check", "rules", str(another / "rules" / "citation-drift.rules.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _promtool("test", "rules", "citation-drift.test.yml", cwd=another / "rules" / "tests")
    assert tested.returncode == 0, tested.stdout + tested.stderr


@needs_promtool
@pytest.mark.parametrize("window", ["5m", "30m", "45m", "1h", "2h"])
def test_the_rule_tests_pass_for_any_rate_window(window: str, tmp_path: Path) -> None:
    """Found walking the README: with rate_window 30m and up, the recorded drift ratio was off
    from 2.5% in its last bit, and the generated test, comparing exactly, failed."""
    out = render_mixin(tmp_path, f'rate_window = "{window}"\n')
    tested = _promtool("test", "rules", "citation-drift.test.yml", cwd=out / "rules" / "tests")
    assert tested.returncode == 0, tested.stdout + tested.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("window", "for_"), [("15m", "5m"), ("30m", "1h"), ("2h", "30m"), ("1h", "2h")]
)
def test_the_coverage_rule_tests_pass_for_any_window_and_for(
    window: str, for_: str, tmp_path: Path
) -> None:
    out = render_mixin(tmp_path, f'coverage_window = "{window}"\ncoverage_for = "{for_}"\n')
    rules = _rules(out / "rules" / "citation-drift.rules.yml")
    assert f"job:citation_uncited_claims_per_claim:ratio_rate{window}" in {
        r.get("record") for r in rules
    }
    alert = next(r for r in rules if r.get("alert") == "CitationUncitedClaimsHigh")
    assert alert["for"] == for_
    tested = _promtool("test", "rules", "citation-drift.test.yml", cwd=out / "rules" / "tests")
    assert tested.returncode == 0, tested.stdout + tested.stderr


@needs_promtool
@pytest.mark.parametrize(
    "settings",
    [
        'entailment_window = "15m"\njudge_errors_for = "5m"\njudge_budget_for = "5m"\n',
        'entailment_window = "2h"\nrate_window = "30m"\njudge_errors_for = "1h"\n',
        'judge_drops_window = "10m"\njudge_budget_for = "30m"\n',
        'judge_drops_window = "1m"\njudge_budget_for = "2m"\nrate_window = "5m"\n',
    ],
    ids=["short", "long", "wide-drops", "narrow-drops"],
)
def test_the_entailment_rule_tests_pass_for_any_window_and_for(
    settings: str, tmp_path: Path
) -> None:
    out = render_mixin(tmp_path, settings)
    config = load_config(tmp_path / "mixin-config.toml")
    rules = _rules(out / "rules" / "citation-drift.rules.yml")
    records = {r.get("record") for r in rules}
    assert (
        f"job:citation_entailment_not_entailed_per_judged:ratio_rate{config.entailment_window}"
        in records
    )
    alerts = {r["alert"]: r for r in rules if "alert" in r}
    assert alerts["CitationJudgeErrorsHigh"]["for"] == config.judge_errors_for
    assert alerts["CitationJudgeBudgetExhausted"]["for"] == config.judge_budget_for
    assert f"[{config.judge_drops_window}]" in alerts["CitationJudgeBudgetExhausted"]["expr"]
    tested = _promtool("test", "rules", "citation-drift.test.yml", cwd=out / "rules" / "tests")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_another_deployment_selects_its_job_and_keeps_its_namespace(another: Path) -> None:
    path = another / "rules" / "citation-drift.rules.yml"
    rules, names = _rules(path), series_names(yaml.safe_load(path.read_text()))
    for rule in rules:
        for metric, matchers in series_selectors(rule["expr"], names):
            assert 'job="citations-prod"' in matchers, f"{rule}: {metric}"
        for labels in re.findall(r"\b(?:by|on) \(([^)]*)\)", rule["expr"]):
            if labels != "le":
                assert labels.startswith("namespace, job"), rule
    records = {r["record"] for r in rules if "record" in r}
    assert "job:citation_drift_failures_per_check:ratio_rate30m" in records
    drift = next(r for r in rules if r.get("alert") == "CitationDriftRateHigh")
    assert drift["for"] == "10m"
    assert "over the last 30 minutes" in drift["annotations"]["description"]
    assert drift["annotations"]["runbook_url"] == (
        "https://runbooks.example.com/citations/CitationDriftRateHigh"
    )


def test_the_promtool_tests_of_another_deployment_expect_its_labels(another: Path) -> None:
    """What the promtool run above holds the rules to: the drift page carries the other job
    and its namespace, and two namespaces are judged apart."""
    document = yaml.safe_load((another / "rules/tests/citation-drift.test.yml").read_text())
    pages = [
        alert["exp_labels"]
        for case in document["tests"]
        for test in case["alert_rule_test"]
        if test["alertname"] == "CitationDriftRateHigh"
        for alert in test["exp_alerts"]
    ]
    assert pages and all(
        page == {"job": "citations-prod", "namespace": "namespace-1", "severity": "critical"}
        for page in pages
    )
    names = [case["name"] for case in document["tests"]]
    assert any("not pooled" in name for name in names)
    assert any("another job" in name for name in names)


@needs_promtool
def test_every_promtool_command_the_docs_give_runs_as_written() -> None:
    # each `promtool ...` in backticks, run from the repository's top as a reader would
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    text = "".join(page.read_text(encoding="utf-8") for page in pages)
    commands = re.findall(r"`promtool ([^`]+\.ya?ml)`", text)
    assert commands, "the docs name a promtool command"
    for command in commands:
        done = _promtool(*command.split(), cwd=REPO)
        assert done.returncode == 0, f"promtool {command}: {done.stderr or done.stdout}"
