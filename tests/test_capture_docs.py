"""The capture pages are true to the code: the refusal table is exporter.capture.REASONS, and
the sender's metrics table is what its collector yields."""

from __future__ import annotations

import re

from docs_blocks import REPO
from prometheus_client import CollectorRegistry

from exporter.capture import REASONS
from exporter.capture.sender import AnswerSender
from exporter.config.kafka import KafkaConnection

PAGE = REPO / "docs" / "capture" / "index.md"


def _table_after(heading: str) -> list[str]:
    """The first column of the table that follows ``heading``, without its backticks."""
    text = PAGE.read_text(encoding="utf-8").split(heading, 1)[1]
    rows = re.findall(r"^\| (.+?) \|", text, re.MULTILINE)
    first: list[str] = []
    for row in rows[1:] if rows and rows[0] in ("reason", "metric") else rows:
        if not row.startswith("`"):
            break
        first.extend(re.findall(r"`([^`]+)`", row))
    return first


def test_the_refusal_table_lists_every_reason_and_no_other() -> None:
    listed = _table_after("## Refusals")
    assert sorted(listed) == sorted(REASONS)


def test_the_metrics_table_lists_what_the_sender_exports() -> None:
    registry = CollectorRegistry()
    AnswerSender(KafkaConnection(), registry=registry)  # never started: nothing is reached
    exported = {metric.name + ("_total" if metric.type == "counter" else "")
                for metric in registry.collect()}  # fmt: skip
    listed = {name.split("{")[0] for name in _table_after("| metric | type | what |")}
    assert listed == exported
