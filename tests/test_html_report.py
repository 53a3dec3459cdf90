"""The sweep's HTML report: its numbers are the summary's, its chart's bars the histogram's, its
examples escaped; drawn from a sweep or from the sweep's verdict file alike; hostile verdict
files refused line by line."""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import re
import tracemalloc
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.checks.evidence import Evidence
from exporter.checks.verdict import Action, Repair, Status, Verdict
from exporter.cli import main
from exporter.cli.report import read_verdicts
from exporter.outputs.html_report import (
    AuditAssumptions,
    expected_count,
    explain_cluster,
    render_report,
    report_view,
)
from exporter.outputs.previous import read_previous
from exporter.outputs.shift_chart import chart_bars, shift_chart_svg
from exporter.outputs.verdict_reader import JudgedRecords, verdict_from_record
from exporter.pipeline.changes import Changes, PreviousVerdicts
from exporter.pipeline.details import (
    EXAMPLES_PER_GROUP,
    MAX_SOURCES,
    MAX_SUPERSEDED_DOCUMENTS,
)
from exporter.pipeline.gate import Gate
from exporter.pipeline.shifts import ShiftCluster, histogram, shift_clusters
from exporter.pipeline.summary import MAX_CHUNKERS, SweepSummary
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=31, answers=1500, invalid_lines=3)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("report"))


class Page(HTMLParser):
    """The elements of a page by id, the attributes of its chart's bars and of its table rows,
    every tag, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, str | None]] = {}
        self.bars: list[dict[str, str | None]] = []
        self.tags: Counter[str] = Counter()
        self.rows: dict[str, str | None] = {}
        self.texts: list[str] = []
        self._status: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        attributes = dict(attrs)
        if "id" in attributes and attributes["id"] is not None:
            self.by_id[attributes["id"]] = attributes
        if tag == "rect" and "bar" in (attributes.get("class") or ""):
            self.bars.append(attributes)
        if tag == "tr" and attributes.get("data-status"):
            self._status = attributes["data-status"]
        if tag == "td" and self._status and "data-count" in attributes:
            self.rows[self._status] = attributes["data-count"]
            self._status = None

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.texts)


def _sweep_with_report(scenario: dict[str, Path], tmp_path: Path) -> tuple[Page, dict[str, Any]]:
    report, summary = tmp_path / "sweep.html", tmp_path / "summary.json"
    verdicts = tmp_path / "verdicts.jsonl.gz"
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--format", "json", "--report", str(report), "--out", str(verdicts)]
    args += ["--judge-sample", "0", "--fail-above", "0.5"]
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        assert main(args) == 0
    summary.write_text(captured.getvalue())
    return Page(report.read_text()), orjson.loads(captured.getvalue())


def test_the_page_shows_the_summary_s_numbers_and_the_histogram_s_bars(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    page, summary = _sweep_with_report(scenario, tmp_path)
    assert float(page.by_id["drift-ratio"]["data-value"] or "nan") == summary["drift_ratio"]
    assert (
        float(page.by_id["superseded-ratio"]["data-value"] or "nan") == summary["superseded_ratio"]
    )
    assert {status: int(count or -1) for status, count in page.rows.items()} == summary["statuses"]
    bars = [(bar["data-bucket"], int(bar["data-count"] or -1)) for bar in page.bars]
    histogram_ = [(b["bucket"], b["count"]) for b in summary["shift"]["histogram"]]
    assert bars == histogram_ and bars, "one bar per bucket, the same counts"
    assert "Gate passed" in page.text
    for cluster in summary["shift"]["clusters"]:
        assert f"shift {cluster['center']:+d}" in page.text
    # the page needs nothing from elsewhere: no script, no external reference
    assert page.tags["script"] == 0 and page.tags["link"] == 0 and page.tags["img"] == 0


def test_the_report_of_the_verdict_file_is_the_report_of_the_sweep(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    swept, _ = _sweep_with_report(scenario, tmp_path)
    redrawn = tmp_path / "redrawn.html"
    verdicts = str(tmp_path / "verdicts.jsonl.gz")
    assert main(["report", verdicts, "--out", str(redrawn), "--fail-above", "0.5"]) == 0
    page = Page(redrawn.read_text())
    assert page.rows == swept.rows
    assert page.bars == swept.bars
    assert page.by_id["drift-ratio"] == swept.by_id["drift-ratio"]
    clusters_and_examples = ("Shift of repaired drift", "Superseded documents")
    assert _between(page.text, *clusters_and_examples) == _between(
        swept.text, *clusters_and_examples
    ), "the same clusters and examples, from the evidence the verdicts keep"
    assert "stored quote" in _between(page.text, *clusters_and_examples)
    assert main(["report", verdicts, "--out", str(redrawn), "--fail-above", "0.0001"]) == 1


def test_a_report_from_the_three_outputs_shows_coverage_and_the_judged_sample(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    outputs = [tmp_path / name for name in ("v.jsonl.gz", "c.jsonl", "j.jsonl.gz")]
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--format", "json", "--judge-sample", "300"]
    for option, path in zip(("--out", "--coverage-out", "--judge-out"), outputs, strict=True):
        args += [option, str(path)]
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        main(args)
    summary = orjson.loads(captured.getvalue())
    page_path = tmp_path / "all.html"
    assert main(["report", *map(str, reversed(outputs)), "--out", str(page_path)]) == 0
    page = Page(page_path.read_text())
    assert page.by_id["uncited"] is not None
    assert f"{summary['coverage']['uncited']:,}" in _between(page.text, "Coverage", "topic")
    judged = summary["entailment"]
    assert f"{judged['sampled']:,} citations judged by {judged['judge']}" in page.text
    for result, count in judged["results"].items():
        if count:
            assert f"{result} {count:,}" in _between(page.text, "judged by", "claim family")


def _between(text: str, start: str, end: str) -> str:
    """From the first ``start`` to the first ``end`` after it."""
    first = text.index(start)
    return text[first : text.index(end, first)]


def _drifted(citation_id: str, quote: str, shift: int | None = 40, source: str = "s") -> Verdict:
    repair = None if shift is None else Repair("c#1", 10, 20, 95.0, "exact", shift)
    status = Status.DRIFT_REPAIRED if shift is not None else Status.DRIFT_UNREPAIRED
    return Verdict(
        citation_id,
        "a",
        "d",
        status,
        Action.REWRITE_OFFSETS if repair else Action.DEGRADE_TO_DOCUMENT,
        reason="quote_mismatch" if repair else "quote_not_found",
        repair=repair,
        source=source,
    )


def test_a_quote_holding_markup_shows_as_text(tmp_path: Path) -> None:
    summary = SweepSummary()
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    summary.add(_drifted("c1", hostile), Evidence(hostile, "</dd><script>", hostile))
    summary.add(_drifted("c2", "q", shift=None, source="<b>src</b>"), Evidence("q", None, None))
    from exporter.outputs.html_report import render_report

    html = render_report(summary, gate=Gate())
    page = Page(html)
    assert page.tags["script"] == 0 and page.tags["img"] == 0 and page.tags["b"] == 0
    assert hostile in page.text and "<b>src</b>" in page.text


def test_an_example_says_what_told_its_place_apart_from_copies() -> None:
    from exporter.outputs.html_report import render_report

    summary = SweepSummary()
    for citation_id, how in (("c1", "unique"), ("c2", "context"), ("c3", "position_hint")):
        verdict = _drifted(citation_id, "quote")
        assert verdict.repair is not None
        verdict.repair = Repair("c#1", 10, 20, 100.0, "exact", 40, how)
        summary.add(verdict, Evidence("quote", "other", "quote"))
    text = Page(render_report(summary, gate=Gate())).text
    assert text.count("found by exact") == 3
    assert text.count("told from its copies by the stored context") == 1
    assert text.count("told from its copies by its position hint (doc_span)") == 1


def test_the_chart_has_a_bar_per_bucket_and_marks_the_clusters() -> None:
    shifts = Counter({40: 300, 41: 50, -3: 20, 900: 5})
    clusters = shift_clusters(shifts)
    bars = chart_bars(shifts, clusters)
    assert [(bar.label, bar.count) for bar in bars] == histogram(shifts)
    marked = {bar.label: bar.clusters for bar in bars if bar.clusters}
    assert marked["[32, 64)"] == ("A",)
    svg = shift_chart_svg(bars)
    assert svg.count('class="bar') == len(bars) and svg.startswith("<svg")
    assert shift_chart_svg([]) == ""


def test_a_bar_is_lettered_only_by_a_cluster_holding_most_of_it() -> None:
    # the bucket [32, 64) holds 300 citations at 60 and 10 at 33; a cluster made of the 10
    # touches the bucket's range but holds a thirtieth of it
    clusters = [ShiftCluster(60, 60, 60, 300, 0.9), ShiftCluster(33, 33, 33, 10, 0.03)]
    bars = chart_bars(Counter({60: 300, 33: 10}), clusters)
    assert {bar.label: bar.clusters for bar in bars}["[32, 64)"] == ("A",)
    split = [ShiftCluster(60, 60, 60, 100, 0.5), ShiftCluster(33, 33, 33, 100, 0.5)]
    # neither holds most of the bucket: no letter claims it
    assert {b.label: b.clusters for b in chart_bars(Counter({60: 100, 33: 100}), split)}[
        "[32, 64)"
    ] == ()


def test_the_chart_says_what_its_colours_and_letters_mean() -> None:
    summary = SweepSummary()
    for i in range(50):
        summary.add(_drifted(f"c{i}", "q", shift=40))
    summary.add(_drifted("far", "q", shift=-900))
    legend = _between(render_report(summary, gate=Gate()), 'id="chart-legend"', "</p>")
    assert "lettered blue bar" in legend and "grey bar" in legend


def test_details_stay_bounded_whatever_the_archive_holds() -> None:
    summary = SweepSummary()
    details = summary.details
    for i in range(20_000):
        verdict = Verdict(
            f"c{i}",
            "a",
            f"doc{i}",
            Status.SUPERSEDED if i % 2 else Status.DRIFT_UNREPAIRED,
            Action.PIN_ARCHIVED_VERSION,
            reason="quote_not_found",
            recorded_version=f"v{i}",
            live_version="live",
            source=f"source-{i}",
        )
        summary.add(verdict, Evidence("q" * 300, None, None))
    assert len(details.by_source) == MAX_SOURCES + 1  # and "other"
    assert sum(sum(c.values()) for c in details.by_source.values()) == 20_000
    assert len(details.superseded) == MAX_SUPERSEDED_DOCUMENTS
    listed = sum(d.citations for d in details.superseded.values())
    assert listed + details.superseded_unlisted_citations == 10_000
    assert all(len(kept) <= EXAMPLES_PER_GROUP for kept in details.examples.values())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 400), st.integers(0, 2**32))
def test_details_merged_from_parts_are_the_details_of_the_whole(cut: int, seed: int) -> None:
    rng = random.Random(seed)
    verdicts = [
        _drifted(f"c{i}", "q", shift=rng.choice([None, 3, 40, 41, -500]), source=f"s{i % 7}")
        for i in range(400)
    ]
    whole = SweepSummary()
    for verdict in verdicts:
        whole.add(verdict)
    first, second = SweepSummary(), SweepSummary()
    for verdict in verdicts[:cut]:
        first.add(verdict)
    for verdict in verdicts[cut:]:
        second.add(verdict)
    first.merge(second)
    assert first.details.by_source == whole.details.by_source
    assert first.details.examples == whole.details.examples


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)
verdict_like = st.fixed_dictionaries(
    {
        "status": st.sampled_from([s.value for s in Status]) | json_values,
        "action": st.sampled_from([a.value for a in Action]) | json_values,
    },
    optional={
        "repair": json_values
        | st.fixed_dictionaries(
            {"chunk_id": json_values, "chunk_span": json_values, "similarity": json_values}
        ),
        "evidence": json_values,
        "citation_id": json_values,
        "source": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(json_values | verdict_like)
def test_any_json_is_a_verdict_or_a_value_error(record: Any) -> None:
    try:
        verdict, _ = verdict_from_record(record)
    except ValueError:
        return
    assert isinstance(verdict, Verdict)


def test_a_hostile_verdict_file_is_reported_line_by_line(tmp_path: Path) -> None:
    good = {"citation_id": "c", "doc_id": "d", "status": "ok", "action": "keep"}
    lines = [
        orjson.dumps(good),
        b"{not json",
        b'{"status": ["ok"], "action": "keep"}',
        b"[" * 100_000 + b"]" * 100_000,
        orjson.dumps({**good, "evidence": {"quote": 7}}),
        b"x" * 2_000_000,
        orjson.dumps(good),
    ]
    path = tmp_path / "hostile.jsonl.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"\n".join(lines) + b"\n")
    html = tmp_path / "hostile.html"
    assert main(["report", str(path), "--out", str(html)]) == 0
    page = Page(html.read_text())
    assert page.rows["ok"] == "2"
    assert page.by_id["unreadable"] is not None and "5" in page.text
    assert f"{path}:2: not a verdict" in page.text


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["stratum", "entailment", "x"]), json_values))
def test_any_judged_record_is_counted_or_a_value_error(record: dict[str, Any]) -> None:
    judged = JudgedRecords()
    try:
        judged.add(record)
    except ValueError:
        assert judged.to_json() is None, "a refused record counts nothing"
        return
    assert judged.to_json() is not None


def test_the_hand_audit_is_the_issue_s_arithmetic() -> None:
    summary = SweepSummary()
    for i in range(1000):
        summary.add(_drifted(f"c{i}", "q") if i < 20 else _ok(f"c{i}"))
    summary.elapsed_seconds = 2.0
    audit = report_view(summary, gate=Gate())["audit"]
    assert audit["citations_read"] == pytest.approx(50 * 2.6)  # a week's 50 answers
    assert audit["drifted_read"] == pytest.approx(130 * 0.02)  # at the measured 2%
    assert audit["flagged"] == pytest.approx(130 * 0.02 * 0.25)  # a reviewer catches a quarter
    assert audit["reviewer_hours"] == pytest.approx(130 / 60)  # a minute a citation
    assert audit["weeks_to_read_archive"] == pytest.approx(1000 / 130)
    assert (audit["sweep_citations"], audit["sweep_drift"]) == (1000, 20)
    other = AuditAssumptions(answers_per_week=10, citations_per_answer=2.0, catch_rate=0.5)
    assert report_view(summary, gate=None, assumptions=other)["audit"]["flagged"] == (
        pytest.approx(20 * 0.02 * 0.5)
    )


def _ok(citation_id: str) -> Verdict:
    return Verdict(citation_id, "a", "d", Status.OK, Action.KEEP, source="s")


@pytest.mark.parametrize(
    ("center", "says"),
    [(2, "a few characters"), (118, "text was added before them"), (-40, "was dropped")],
)
def test_each_cluster_is_explained_by_where_it_lies(center: int, says: str) -> None:
    cluster = ShiftCluster(center, center - 1, center + 1, 600, 0.6)
    sentence = explain_cluster(cluster, "A")
    assert sentence.startswith("Cluster A: 600 citations (60% of repaired drift")
    assert says in sentence and "One cause explains most of the drift." in sentence
    assert "One cause" not in explain_cluster(ShiftCluster(9, 8, 10, 10, 0.1), "B")


def test_a_verdict_file_of_many_kinds_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """100,000 verdicts, each of a source and a superseded document of its own, drift in every
    shift bucket: what the report keeps stays small (the million-verdict figures are in
    bench/report_bench.py)."""
    path = tmp_path / "many.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        for i in range(100_000):
            record: dict[str, Any] = {
                "citation_id": f"c{i}",
                "doc_id": f"doc{i}",
                "source": f"source-{i}",
                "action": "keep",
                "status": "ok",
            }
            if i % 3 == 1:
                record |= {"status": "superseded", "action": "pin_archived_version"}
                record |= {"recorded_version": f"v{i}", "live_version": "live"}
            elif i % 3 == 2:
                shift = (i % 20_000) - 10_000
                record |= {"status": "drift_repaired", "action": "rewrite_offsets"}
                record["repair"] = {
                    "chunk_id": "c",
                    "chunk_span": [0, 1],
                    "similarity": 100,
                    "method": "exact",
                    "shift": shift,
                }
                record["evidence"] = {"quote": "q" * 300, "recorded": "r" * 300, "found": None}
            out.write(orjson.dumps(record) + b"\n")
    summary = SweepSummary()
    tracemalloc.start()
    try:
        unreadable = read_verdicts([str(path)], summary, JudgedRecords())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert unreadable == 0 and summary.citations == 100_000
    details = summary.details
    assert len(details.by_source) == MAX_SOURCES + 1
    assert len(details.superseded) == MAX_SUPERSEDED_DOCUMENTS
    assert sum(len(kept) for kept in details.examples.values()) <= 31 * EXAMPLES_PER_GROUP
    assert peak < 16 * 2**20, f"{peak / 2**20:.1f} MiB"  # the shifts' counts are most of it


# -- found by a hostile review (each reproduced here first) -----------------------------------


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return path


def _exit(args: list[str]) -> int | str | None:
    """The command's exit status, a usage error's (SystemExit) included."""
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


GOOD = {"citation_id": "c", "doc_id": "d", "status": "ok", "action": "keep", "source": "s"}


def test_a_title_or_file_name_that_is_not_utf_8_is_shown_not_a_crash(tmp_path: Path) -> None:
    verdicts = _write(tmp_path / "v\udcfe.jsonl", [GOOD])  # a file name of byte 0xFE
    page = tmp_path / "p.html"
    assert _exit(["report", str(verdicts), "--out", str(page), "--title", "T\udcff"]) == 0
    assert "T\ufffd" in page.read_text() and "v\ufffd.jsonl" in page.read_text()


def test_the_report_is_never_written_over_another_output(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    verdicts = tmp_path / "v.jsonl"
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--judge-sample", "0", "--out", str(verdicts)]
    assert _exit([*args, "--report", str(verdicts)]) == 2
    assert not verdicts.exists(), "refused before the sweep"
    assert _exit([*args[:-2], "--out", "-", "--report", "-"]) == 2


def test_a_report_that_cannot_be_written_is_refused_before_the_sweep(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = tmp_path / "v.jsonl"
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--out", str(verdicts), "--report", str(tmp_path / "no" / "r.html")]
    assert _exit(args) == 2
    assert not verdicts.exists()
    assert "--report" in capsys.readouterr().err


def test_highlighting_adversarial_texts_is_fast_and_free_texts_make_few_groups(
    tmp_path: Path,
) -> None:
    """Verdicts whose evidence is worst for a word diff, each with a reason of its own: before,
    200 of them took 149 s, and every reason became a group of examples and a table row."""
    records = [
        {
            **GOOD,
            "citation_id": f"c{i}",
            "status": "drift_unrepaired",
            "action": "degrade_to_document",
            "reason": f"made-up-{i}",
            "evidence": {"quote": "." * 300, "recorded": "a." * 150, "found": None},
        }
        for i in range(200)
    ]
    page = tmp_path / "p.html"
    assert _exit(["report", str(_write(tmp_path / "v.jsonl", records)), "--out", str(page)]) == 0
    text = Page(page.read_text()).text
    assert "made-up" not in text, "a reason no sweep writes is shown as other"
    assert "other: 200 citations" in text


def test_an_empty_or_unreadable_verdict_file_fails_the_gate(tmp_path: Path) -> None:
    empty, page = tmp_path / "empty.jsonl", tmp_path / "p.html"
    empty.write_bytes(b"")
    assert _exit(["report", str(empty), "--out", str(page), "--fail-above", "0"]) == 2
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not json\n" * 3)
    assert _exit(["report", str(garbage), "--out", str(page), "--fail-above", "0"]) == 2
    assert _exit(["report", str(garbage), "--out", str(page), "--allow-empty"]) == 0


def test_a_truncated_gzip_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = tmp_path / "whole.jsonl.gz"
    with gzip.open(whole, "wb") as out:
        out.write(orjson.dumps(GOOD) * 0 + b"".join(orjson.dumps(GOOD) + b"\n" for _ in range(999)))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    assert _exit(["report", str(cut), "--out", str(tmp_path / "p.html")]) == 2
    assert str(cut) in capsys.readouterr().err


def test_superseded_citations_past_the_document_cap_are_all_counted() -> None:
    summaries = [SweepSummary(), SweepSummary(), SweepSummary()]
    whole, parts = summaries[0].details, [summaries[1].details, summaries[2].details]
    verdicts = [
        Verdict(
            f"c{i}",
            "a",
            f"doc{i // 10}",
            Status.SUPERSEDED,
            Action.PIN_ARCHIVED_VERSION,
            recorded_version=f"v{i}",  # ten versions of each document
            live_version="live",
        )
        for i in range(10 * (MAX_SUPERSEDED_DOCUMENTS + 20))
    ]
    half = len(verdicts) // 2 + 5
    for i, verdict in enumerate(verdicts):
        summaries[0].add(verdict)
        summaries[1 + (i >= half)].add(verdict)
    summaries[1].merge(summaries[2])
    for details in (whole, parts[0]):
        listed = sum(document.citations for document in details.superseded.values())
        assert listed + details.superseded_unlisted_citations == len(verdicts)
    assert parts[0].superseded_unlisted_citations == whole.superseded_unlisted_citations


def test_bidirectional_and_control_characters_are_shown_escaped(tmp_path: Path) -> None:
    record = {
        **GOOD,
        "citation_id": "c\u202eevil",
        "status": "drift_unrepaired",
        "action": "degrade_to_document",
        "reason": "quote_not_found",
        "source": "s\u202ex\x00\x1b",
        "evidence": {"quote": "q\u202eq", "recorded": None, "found": None},
    }
    page = tmp_path / "p.html"
    assert _exit(["report", str(_write(tmp_path / "v.jsonl", [record])), "--out", str(page)]) == 0
    html = page.read_text()
    assert "\u202e" not in html and "\x00" not in html and "\x1b" not in html
    assert "c\\u202eevil" in html and "s\\u202ex\\x00\\x1b" in html


def test_shifts_spread_evenly_are_not_explained_as_one_cause() -> None:
    cluster = ShiftCluster(0, -5000, 4999, 3000, 1.0)
    sentence = explain_cluster(cluster, "A")
    assert "One cause" not in sentence and "a few characters" not in sentence
    assert "spread" in sentence


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0, "none"),
        (0.3, "fewer than 1"),
        (3.4, "about 3"),
        (13.8, "about 14"),
        (1234.5, "about 1,234"),
    ],
)
def test_an_expected_count_of_citations_is_whole_and_said_to_be_expected(
    value: float, shown: str
) -> None:
    assert expected_count(value) == shown


def test_the_hand_audit_shows_no_fraction_of_a_citation() -> None:
    summary = SweepSummary()
    for i in range(1000):
        summary.add(_drifted(f"c{i}", "q") if i < 106 else _ok(f"c{i}"))  # 13.78 of 130 read
    page = render_report(summary, gate=Gate())
    audit = _between(page, '<table id="audit">', "</table>")
    assert "about 14" in audit and "about 3" in audit and "(expected)" in audit
    assert "13.8" not in audit and "3.4" not in audit


def test_the_page_leads_with_what_readers_see_broken() -> None:
    summary = SweepSummary()
    for i in range(100):
        summary.add(_drifted(f"r{i}", "q", shift=3))  # many repaired, a few characters off
    for i in range(4):
        summary.add(_drifted(f"u{i}", "q", shift=None))
    summary.add(Verdict("m1", "a", "gone", Status.DOCUMENT_MISSING, Action.DEGRADE_TO_DOCUMENT))
    page = render_report(summary, gate=Gate())
    unrepaired, missing = (
        page.index("<h2>Unrepaired drift</h2>"),
        page.index('id="missing-documents"'),
    )
    clusters = page.index('<section class="cluster"')
    # after the verdict, before the statuses and the (larger) repaired clusters
    assert page.index('id="verdict"') < unrepaired < missing < page.index('id="statuses"')
    assert missing < clusters
    assert re.search(r"no longer holds: <strong>1</strong> \([\d.]+% of the valid ones\)", page)


def test_a_page_with_nothing_missing_has_no_missing_section() -> None:
    summary = SweepSummary()
    summary.add(_ok("c1"))
    assert 'id="missing-documents"' not in render_report(summary, gate=Gate())


def test_invisible_characters_show_as_marks_the_page_names() -> None:
    summary = SweepSummary()
    evidence = Evidence("Refunds\xa0take 5 days", "Re\xadfunds take 5 days", None)
    summary.add(_drifted("c1", "q", shift=None), evidence)
    page = render_report(summary, gate=Gate())
    assert "\\xa0" not in page and "\\xad" not in page  # no raw escapes
    examples = _between(page, '<section class="unrepaired"', "</section>")
    assert "\u237d" in examples and "\xac" in examples
    legend = _between(page, '<span id="marks">', "</span>")
    assert "\u237d</code> a no-break space" in legend and "\xac</code> a soft hyphen" in legend


def test_a_quote_found_as_it_was_stored_has_nothing_highlighted() -> None:
    # found again with other line breaks and a curly apostrophe: the same words
    summary = SweepSummary()
    evidence = Evidence("the customer's\nrefund", "another text", "the customer\u2019s refund")
    summary.add(_drifted("c1", "q", shift=40), evidence)
    page = render_report(summary, gate=Gate())
    found = _between(page, '<dd class="found">', "</dd>")
    assert "<mark>" not in found
    assert "<mark>" in _between(page, '<dd class="span">', "</dd>")  # other words: marked
    note = _between(page, 'id="reading-examples"', "</p>")
    assert "compared with each other" in note and "spacing and typography are no difference" in note


def test_a_page_without_invisible_characters_has_no_legend_of_them() -> None:
    summary = SweepSummary()
    summary.add(_drifted("c1", "q", shift=None), Evidence("Refunds", "Returns", None))
    assert 'id="marks"' not in render_report(summary, gate=Gate())


def test_each_failing_section_says_what_to_do() -> None:
    summary = SweepSummary()
    summary.add(_drifted("r1", "q", shift=40))
    summary.add(_drifted("u1", "q", shift=None))
    summary.add(Verdict("m1", "a", "gone", Status.DOCUMENT_MISSING, Action.DEGRADE_TO_DOCUMENT))
    page = render_report(summary, gate=Gate())
    assert "Roll the change back or re-cite them" in _between(page, "Unrepaired drift", "</p>")
    assert "roll the re-index back" in _between(page, 'id="missing-documents"', "</p>")
    assert "apply the repairs" in _between(page, "<h2>Shift of repaired drift</h2>", "</p>")


# -- the store's chunker fingerprint and when it was read --------------------------------------


def test_the_page_shows_the_store_s_chunkers_and_when_it_was_read(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    page, summary = _sweep_with_report(scenario, tmp_path)
    chunkers = summary["chunkers"]
    assert chunkers and sum(c["chunks"] for c in chunkers) == summary["chunks_loaded"]
    assert summary["store_read_at"].endswith("Z")
    store = _between(page.text, "Chunk store", "\n")
    for chunker in chunkers:
        assert f"{chunker['chunker']} ({chunker['chunks']:,} chunks)" in store
    assert summary["store_read_at"][:16].replace("T", " ") in store


def test_a_report_from_verdicts_shows_the_fingerprint_its_summary_recorded(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    _, summary = _sweep_with_report(scenario, tmp_path)
    verdicts, redrawn = str(tmp_path / "verdicts.jsonl.gz"), tmp_path / "redrawn.html"
    assert main(["report", verdicts, "--out", str(redrawn)]) == 0
    assert "chunker fingerprint not recorded" in Page(redrawn.read_text()).text
    args = ["report", verdicts, "--summary", str(tmp_path / "summary.json")]
    assert main([*args, "--out", str(redrawn)]) == 0
    store = _between(Page(redrawn.read_text()).text, "Chunk store", "\n")
    assert summary["chunkers"][0]["chunker"] in store and "not recorded" not in store
    # a summary written before the fingerprint was recorded
    old = {k: v for k, v in summary.items() if k not in ("chunkers", "store_read_at")}
    (tmp_path / "old.json").write_bytes(orjson.dumps(old))
    args = ["report", verdicts, "--summary", str(tmp_path / "old.json")]
    assert main([*args, "--out", str(redrawn)]) == 0
    assert "chunker fingerprint not recorded" in Page(redrawn.read_text()).text


def test_many_chunkers_are_listed_a_few_and_counted_all() -> None:
    summary = SweepSummary()
    counts: Counter[str | None] = Counter({f"cut-{i}": 100 + i for i in range(30)})
    counts[None] = 7
    summary.store_read(counts, datetime(2026, 6, 1, 12, 30, tzinfo=UTC))
    assert summary.chunkers is not None and len(summary.chunkers) == MAX_CHUNKERS
    assert summary.chunkers[0] == ("cut-29", 129)
    listed = sum(count for _, count in summary.chunkers)
    assert listed + summary.chunkers_unlisted == sum(counts.values())
    text = Page(render_report(summary, gate=None)).text
    assert "2026-06-01 12:30:00 UTC" in text and "cut-29 (129 chunks)" in text
    assert f"{summary.chunkers_unlisted:,} chunks of further chunkers" in text


# -- what changed since the previous sweep ------------------------------------------------------

FAILING_NAMES = ("drift_unrepaired", "document_missing", "drift_repaired", "superseded")


def _statuses_by_id(path: Path) -> dict[str, str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as lines:
        records = [orjson.loads(line) for line in lines]
    return {r["citation_id"]: r["status"] for r in records if "check" not in r}


def _expected_changes(before: dict[str, str], now: dict[str, str]) -> dict[str, dict[str, int]]:
    """The table by status, counted the plain way: both runs whole in dicts."""
    rows = {}
    for status in FAILING_NAMES:
        was = {i for i, s in before.items() if s == status}
        is_ = {i for i, s in now.items() if s == status}
        rows[status] = {
            "previous": len(was),
            "now": len(is_),
            "new": sum(1 for i in is_ if before.get(i) not in FAILING_NAMES),
            "still": len(was & is_),
            "fixed": sum(1 for i in was if now.get(i) == "ok"),
            "gone": len(was - now.keys()),
        }
    return rows


def _previous_of(verdicts: Path, tmp_path: Path) -> Path:
    """An earlier sweep's verdicts made from these: some fixed since, some newly failing, some
    moved, and some citations of its own that this run does not have."""
    previous = tmp_path / "previous.jsonl.gz"
    with gzip.open(verdicts, "rb") as lines, gzip.open(previous, "wb") as out:
        for number, line in enumerate(lines):
            record = orjson.loads(line)
            if "check" not in record and number % 7 == 0:
                record["status"] = "ok" if record["status"] != "ok" else "drift_unrepaired"
                record.update(action="keep", reason=None, repair=None)
            if "check" not in record and number % 11 == 0 and record["status"] == "drift_repaired":
                record.update(status="superseded", repair=None)
            if number % 13 == 0:
                continue  # not in the earlier sweep: new to this one
            out.write(orjson.dumps(record) + b"\n")
        for i in range(25):  # gone from this one
            gone = {**GOOD, "citation_id": f"gone-{i}", "status": "document_missing"}
            out.write(orjson.dumps({**gone, "action": "degrade_to_document"}) + b"\n")
    return previous


def _changes_table(html: str) -> dict[str, dict[str, int]]:
    """The page's table of changes by status, each row's numbers by column."""
    table = _between(html, '<table id="changes-by-status">', "</table>")
    names = ["previous", "now", "new", "fixed", "still", "moved_in", "moved_out", "gone"]
    rows = {}
    for status, cells in re.findall(r'<tr id="change-(\w+)">(.*?)</tr>', table):
        numbers = [int(n.replace(",", "")) for n in re.findall(r'class="n">([\d,]+)<', cells)]
        rows[status] = dict(zip(names, numbers, strict=True))
    return rows


def test_the_report_says_what_changed_since_the_previous_sweep_s_verdicts(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    _sweep_with_report(scenario, tmp_path)
    verdicts = tmp_path / "verdicts.jsonl.gz"
    previous = _previous_of(verdicts, tmp_path)
    page = tmp_path / "changes.html"
    assert main(["report", str(verdicts), "--previous", str(previous), "--out", str(page)]) == 0
    html = page.read_text()
    found = _changes_table(html)
    expected = _expected_changes(_statuses_by_id(previous), _statuses_by_id(verdicts))
    for status, row in expected.items():
        assert {k: found[status][k] for k in row} == row, status
        # every citation failing now came from somewhere, every one failing before went
        moved = found[status]
        assert moved["now"] == moved["new"] + moved["still"] + moved["moved_in"]
        assert moved["previous"] == (
            moved["still"] + moved["fixed"] + moved["moved_out"] + moved["gone"]
        )
    assert expected["document_missing"]["gone"] == 25
    assert "Gone from this sweep, so neither fixed nor checked again: 25 document_missing" in (
        Page(html).text
    )
    assert "drift_repaired \u2192 superseded" not in Page(html).text  # superseded then: back
    assert "superseded \u2192 drift_repaired" in Page(html).text
    # by source: the source's new, fixed and still failing add up to the statuses'
    sources = _between(html, '<table id="changes-by-source">', "</table>")
    cells = [int(n.replace(",", "")) for n in re.findall(r'class="n">([\d,]+)<', sources)]
    assert sum(cells[0::3]) == sum(row["new"] for row in found.values())
    assert sum(cells[1::3]) == sum(row["fixed"] for row in found.values())
    # the section comes right after the verdict, before what readers see broken
    assert html.index('id="verdict"') < html.index('id="changes"') < html.index('id="statuses"')


def test_the_sweep_compares_with_the_previous_sweep_s_summary_by_count(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    _, summary = _sweep_with_report(scenario, tmp_path)
    earlier = {**summary, "statuses": {**summary["statuses"], "drift_unrepaired": 1}}
    previous = tmp_path / "monday.json"
    previous.write_text(orjson.dumps(earlier, option=orjson.OPT_INDENT_2).decode())  # as jq . does
    page = tmp_path / "again.html"
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--judge-sample", "0", "--fail-above", "0.5", "--format", "json"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*args, "--report", str(page), "--previous", str(previous)]) == 0
    html = page.read_text()
    note = Page(_between(html, 'id="changes-by-count"', "</p>")).text
    assert "only how each count changed is shown" in note
    table = _between(html, '<table id="changes-by-status">', "</table>")
    unrepaired = summary["statuses"]["drift_unrepaired"]
    row = _between(table, 'id="change-drift_unrepaired"', "</tr>")
    assert ">1<" in row and f">{unrepaired:,}<" in row and f">{unrepaired - 1:+,}<" in row
    assert 'id="change-ok"' in table and "changes-by-source" not in html


ONE_VERDICT = b'{"citation_id": "c", "status": "ok", "action": "keep"}\n'


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"citation_id": "c", "status": "ok", "action": "keep"}\n{"citation_id": "d"\n', ":2: "),
        (
            b'{"citation_id": "c", "status": "ok", "action": "keep"}\n\n[1, 2]\n',
            ":3: not a verdict",
        ),
        (b"citation_id,status\nc,ok\n", ":1: not valid JSON"),
        (b"", "empty"),
        (b'{"statuses": {"ok": -1}}\n', ":1: 'statuses.ok' is not a count"),
        (b'{"statuses": {"ok": 1}}\n{"statuses": {"ok": 1}}\n', ":2: a sweep summary is one"),
        (b'{\n "statuses": {"ok": 1}\n', "not valid JSON"),
        # hostile: nested far beyond any reader, a summary spread over lines past its bound,
        # and a gzip stream cut short
        (b"[" * 100_000 + b"\n", ":1: "),
        (
            b'{\n "statuses": {"ok": 1},\n' + b' "pad": "' + b"x" * (17 << 20) + b'"\n}\n',
            "--previous",
        ),
        (gzip.compress(ONE_VERDICT * 1000)[:-40], "--previous"),
    ],
)
def test_a_bad_previous_file_is_one_line_naming_it_before_any_work(
    scenario: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    says: str,
) -> None:
    previous = tmp_path / "previous.jsonl"
    previous.write_bytes(content)
    verdicts, page = tmp_path / "v.jsonl", tmp_path / "p.html"
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--out", str(verdicts), "--report", str(page)]
    assert _exit([*args, "--previous", str(previous)]) == 2
    error = capsys.readouterr().err.strip()
    assert not verdicts.exists() and not page.exists(), "refused before the sweep"
    assert error.count("\n") == 0 and error.startswith("citation-exporter: error: --previous")
    assert str(previous) in error and says in error
    good = _write(tmp_path / "good.jsonl", [GOOD])
    assert _exit(["report", str(good), "--previous", str(previous), "--out", str(page)]) == 2
    assert says in capsys.readouterr().err and not page.exists()


def test_previous_needs_the_report_and_is_explained_in_the_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _exit(["sweep", "--example", "--previous", "x.jsonl"]) == 2
    assert "--previous is compared with in the report" in capsys.readouterr().err
    for command in ("sweep", "report"):
        assert _exit([command, "--help"]) == 0
        help_ = " ".join(capsys.readouterr().out.split())
        assert "--previous FILE an earlier sweep to compare with" in help_
        assert "--previous monday/verdicts.jsonl.gz" in help_


def test_the_previous_sweep_s_verdicts_cost_an_entry_per_citation(tmp_path: Path) -> None:
    """What --previous keeps of a verdict file: each citation's id and a small code, and
    nothing per verdict of this run (the figure the help and the docs give)."""
    path = tmp_path / "previous.jsonl.gz"
    count = 100_000
    with gzip.open(path, "wb", compresslevel=1) as out:
        for i in range(count):
            record = {**GOOD, "citation_id": f"cit-{i:07d}", "evidence": {"quote": "q" * 300}}
            out.write(orjson.dumps(record) + b"\n")
    tracemalloc.start()
    try:
        previous = read_previous(str(path))
        kept, _ = tracemalloc.get_traced_memory()
        assert isinstance(previous, PreviousVerdicts)
        changes = Changes(previous)
        for i in range(count):
            changes.add(f"cit-{i:07d}", Status.DRIFT_REPAIRED, "s")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(previous.ids) == count
    assert kept / count < 130, f"{kept / count:.0f} bytes a citation"
    assert peak / count < 160, f"{peak / count:.0f} bytes a citation at the peak"
    assert changes.rows()[2]["new"] == count  # drift_repaired now, ok before


def test_a_small_archive_is_audited_whole_and_counted_in_the_singular(tmp_path: Path) -> None:
    """Found by a new user: 20 citations, and the hand audit 'read' 130 and expected 62 of them
    drifted; '1 live documents', '1 answers judged'."""
    chunks, citations, page = tmp_path / "c.jsonl", tmp_path / "a.jsonl", tmp_path / "r.html"
    chunks.write_text(
        '{"doc_id": "d", "doc_version": "1", "chunk_id": "d#0", "text": "Refunds take a week."}\n'
    )

    def citation(number: int, start: int) -> dict[str, Any]:
        return {
            "citation_id": f"c-{number}",
            "doc_id": "d",
            "doc_version": "1",
            "chunk_id": "d#0",
            "chunk_span": [start, start + 19],
            "quote": "Refunds take a week",
            "sentence_index": 0,
        }

    event = {"answer_id": "a", "sentences": ["Refunds take a week."]}
    answer = orjson.dumps({**event, "citations": [citation(1, 0), citation(2, 1)]}).decode() + "\n"
    citations.write_text(answer)
    args = ["sweep", "--chunks", str(chunks), "--citations", str(citations)]
    assert main([*args, "--report", str(page), "--no-progress"]) == 1
    text = Page(page.read_text(encoding="utf-8")).text
    assert "1 live document (1 chunk)" in text and "1 answer judged" in text
    audit = _between(text, "A hand audit", "audit reads")
    assert "the whole archive" in audit and "about 62" not in audit
    assert "fewer than one week's audit reads" in text
    assert "0 weeks" not in text


def test_the_missing_documents_are_named_most_cited_first_and_bounded() -> None:
    """Found by a new user: the page said one citation's document was gone, not which."""
    from exporter.pipeline.details import MAX_MISSING_DOCUMENTS

    def gone(doc_id: str) -> Verdict:
        return Verdict(
            citation_id=f"c-{doc_id}",
            answer_id="a",
            doc_id=doc_id,
            status=Status.DOCUMENT_MISSING,
            reason="document_missing",
            action=Action.DROP_CITATION,
        )

    first, second = SweepSummary(), SweepSummary()
    for verdict in [gone("faq"), gone("pricing"), gone("pricing")]:
        first.add(verdict)
    for i in range(MAX_MISSING_DOCUMENTS + 5):
        second.add(gone(f"doc-{i:04d}"))
    first.merge(second)
    view = report_view(first, gate=Gate())
    listed = view["missing_documents"]
    assert listed[0] == ("pricing", 2) and ("faq", 1) in listed
    assert len(listed) == MAX_MISSING_DOCUMENTS
    assert view["missing_unlisted_citations"] == 7


def test_the_page_names_each_missing_document(tmp_path: Path) -> None:
    chunks, citations, page = tmp_path / "c.jsonl", tmp_path / "a.jsonl", tmp_path / "r.html"
    chunks.write_text('{"doc_id": "d", "doc_version": "1", "chunk_id": "d#0", "text": "Kept."}\n')
    citations.write_text(
        '{"citation_id": "c-1", "answer_id": "a", "doc_id": "gone-faq", "doc_version": "1", '
        '"chunk_id": "gone-faq#0", "chunk_span": [0, 4], "quote": "Kept"}\n'
    )
    args = ["sweep", "--chunks", str(chunks), "--citations", str(citations), "--no-progress"]
    assert main([*args, "--report", str(page)]) == 1
    listed = _between(Page(page.read_text(encoding="utf-8")).text, "Missing documents", "status")
    assert "gone-faq" in listed
