"""Write a scenario to a directory as the JSONL files the sweep and the tests read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from exporter.files.jsonl import open_output
from exporter.simulate.scenario import Scenario

__all__ = ["SCENARIO_FILES", "write_scenario"]

SCENARIO_FILES = {
    "chunks_before": "chunks.before.jsonl",
    "chunks": "chunks.jsonl",
    "citations": "citations.jsonl",
    "expected": "expected.jsonl",
    "expected_coverage": "expected-coverage.jsonl",
    "misclaims": "misclaims.jsonl",
    "summary": "scenario.json",
}


def _write_jsonl(path: Path, records: Iterable[dict[str, Any] | bytes]) -> None:
    with open_output(str(path)) as out:
        for record in records:
            if isinstance(record, bytes):
                out.write(record + b"\n")
            else:
                out.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))


def write_scenario(
    scenario: Scenario, directory: Path, *, compress: bool = False
) -> dict[str, Path]:
    """Write every file of ``scenario`` into ``directory``; returns their paths by role.

    ``chunks.jsonl`` is the live store as a compacted topic would replay it: the original chunks,
    then the re-chunks, re-extractions and deletions, so last-record-wins matters.
    """
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if compress else ""
    paths = {
        role: directory / (name + suffix if name.endswith(".jsonl") else name)
        for role, name in SCENARIO_FILES.items()
    }
    _write_jsonl(paths["chunks_before"], scenario.chunks_before)
    _write_jsonl(paths["chunks"], [*scenario.chunks_before, *scenario.chunk_updates])
    _write_jsonl(paths["citations"], scenario.citation_lines)
    _write_jsonl(paths["expected"], scenario.expected)
    _write_jsonl(paths["expected_coverage"], scenario.expected_coverage)
    _write_jsonl(paths["misclaims"], scenario.misclaims)
    paths["summary"].write_bytes(
        orjson.dumps(scenario.summary(), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    )
    return paths
