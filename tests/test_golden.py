"""Outputs that must not change when the code is restructured: digests of what the project
writes, compared with the digests recorded when they were last meant to change.

Issue 23 reshapes how checks, sources and engines fit together; users must see no difference.
Every verdict, coverage verdict, judged sample and summary of a sweep (one worker and two),
every verdict and metric of a replay through the streaming pipeline, and the demo's traffic
through it, are digested here. When a change is *meant* to alter an output, record the new
digests with ``CITATION_GOLDEN_UPDATE=1 pytest tests/test_golden.py`` and say why in the commit.

The man page corpora depend on the man pages installed, so their digests are kept per digest of
the corpus itself: on a machine whose pages differ the comparison is skipped, saying so.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.checks.store import ChunkStore
from exporter.cli import main
from exporter.demo.traffic import demo_phases
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.verdicts import verdict_json
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.outcome import Mode, Outcome
from exporter.records.chunk_messages import chunk_message
from exporter.settings import Settings
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import Scenario, ScenarioConfig, build_scenario

GOLDEN = Path(__file__).parent / "data" / "golden.json"
UPDATE = os.environ.get("CITATION_GOLDEN_UPDATE") == "1"
SCENARIO = ScenarioConfig(
    seed=23,
    answers=1200,
    hint_share=0.2,
    uncited_share=0.2,
    misclaim_share=0.05,
    invalid_lines=9,
)
NOW = "2026-06-01T00:00:00Z"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _recorded() -> dict[str, str]:
    return json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}


def _compare(found: dict[str, str]) -> None:
    """Each digest against the recorded one (or, when updating, record it)."""
    recorded = _recorded()
    if UPDATE:
        recorded.update(found)
        GOLDEN.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    changed = [name for name, digest in found.items() if recorded.get(name) != digest]
    assert not changed, (
        f"outputs changed: {', '.join(changed)} (if meant, run CITATION_GOLDEN_UPDATE=1 "
        "pytest tests/test_golden.py and say why in the commit)"
    )


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return build_scenario(SCENARIO)


@pytest.fixture(scope="module")
def files(scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_scenario(scenario, tmp_path_factory.mktemp("golden"))


def _timeless(value: Any) -> Any:
    """A JSON value without what measures the machine or reads the clock: every timing in it,
    and when the store was read."""
    if isinstance(value, dict):
        return {
            key: _timeless(item)
            for key, item in value.items()
            if not key.endswith("seconds") and key not in ("citations_per_second", "store_read_at")
        }
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


def _stable_json(text: bytes) -> bytes:
    """JSON (one document, or one per line) without its timings."""
    lines = text.splitlines() if text.lstrip().startswith(b'{"') else [text]
    return b"\n".join(orjson.dumps(_timeless(json.loads(line))) for line in lines if line.strip())


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_sweep_writes_what_it_wrote(
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    jobs: str,
) -> None:
    outputs = {name: tmp_path / f"{name}.jsonl" for name in ("verdicts", "coverage", "judged")}
    status = main(
        [
            "sweep",
            "--chunks",
            str(files["chunks"]),
            "--citations",
            str(files["citations"]),
            "--out",
            str(outputs["verdicts"]),
            "--coverage-out",
            str(outputs["coverage"]),
            "--judge-out",
            str(outputs["judged"]),
            "--judge-sample",
            "300",
            "--seed",
            "5",
            "--now",
            NOW,
            "--format",
            "json",
            "--jobs",
            jobs,
            "--no-progress",
        ]
    )
    # the summary names the input's lines that could not be read: by a path that is new per run
    directory = str(files["citations"].parent).encode()
    summary = capsys.readouterr().out.encode().replace(directory, b"<scenario>")
    found = {f"sweep {name}": _digest(path.read_bytes()) for name, path in outputs.items()}
    found["sweep judged"] = _digest(_stable_json(outputs["judged"].read_bytes()))
    found["sweep summary"] = _digest(_stable_json(summary))
    found["sweep status"] = _digest(str(status).encode())
    _compare(found)


def _as_bytes(line: dict[str, Any] | bytes) -> bytes:
    return line if isinstance(line, bytes) else orjson.dumps(line)


def _replay_records(scenario: Scenario) -> Iterator[LocalRecord]:
    """The store before, the answers, the re-index, the answers again: as a stream sees them."""
    settings = Settings()
    answers = [_as_bytes(line) for line in scenario.citation_lines]
    chunks_before = [orjson.dumps(record) for record in scenario.chunks_before]
    updates = [orjson.dumps(record) for record in scenario.chunk_updates]
    offset = 0
    for group, topic in (
        (chunks_before, settings.chunks_topic),
        (answers, settings.answers_topic),
        (updates, settings.chunks_topic),
        (answers, settings.answers_topic),
    ):
        for value in group:
            offset += 1
            yield _record(topic, offset, value, settings)


def _record(topic: str, offset: int, value: bytes, settings: Settings) -> LocalRecord:
    message = chunk_message(value) if topic == settings.chunks_topic else None
    key, body = message if message is not None else (None, value)
    return LocalRecord(topic, 0, offset, key, body)


def _metrics_text(registry: CollectorRegistry) -> bytes:
    """The exposition without what measures the machine or the clock."""
    kept = [
        line
        for line in generate_latest(registry).decode().splitlines()
        if "_seconds" not in line and "_created" not in line and "build_info" not in line
    ]
    return "\n".join(kept).encode()


def _through_pipeline(records: Iterator[LocalRecord]) -> dict[str, bytes]:
    """Every record through the streaming pipeline, counted in batches as the loops count."""
    settings = Settings()
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "golden")
    pipeline = Pipeline(ChunkStore(), settings.policy, publish_all=True)
    written = io.BytesIO()
    batch: list[Outcome] = []
    for record in records:
        if record.topic == settings.chunks_topic:
            outcome = pipeline.chunk(record)
        else:
            outcome = pipeline.answer(record)
        for verdict in outcome.publish:
            written.write(verdict_json(verdict, mode=Mode.INLINE, line=record.offset))
        if outcome.dead_letter is not None:
            letter = outcome.dead_letter
            written.write(
                f"dead letter {record.offset}: {letter.reason}: {letter.error}\n".encode()
            )
        batch.append(outcome)
        if len(batch) == 500:
            metrics.record(batch)
            batch = []
    metrics.record(batch)
    return {"metrics": _metrics_text(registry), "verdicts": written.getvalue()}


def test_a_replay_through_the_stream_counts_what_it_counted(scenario: Scenario) -> None:
    found = _through_pipeline(_replay_records(scenario))
    _compare({f"replay {name}": _digest(data) for name, data in found.items()})


def test_the_demo_traffic_counts_what_it_counted() -> None:
    settings = Settings()
    demo = build_scenario(ScenarioConfig(seed=11, answers=900, hint_share=0.5))
    records = (
        record
        for phase in demo_phases(demo, settings.chunks_topic, settings.answers_topic)
        for record in [*phase.chunks, *phase.answers]
    )
    found = _through_pipeline(records)
    _compare({f"demo {name}": _digest(data) for name, data in found.items()})
