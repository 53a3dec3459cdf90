"""Every generated file, by path relative to the repository root."""

from __future__ import annotations

from mixin.render import to_yaml
from mixin.rule_tests import rule_tests
from mixin.rules import rule_groups

__all__ = ["generated_files"]


def generated_files() -> dict[str, str]:
    return {
        "rules/citation-drift.rules.yml": to_yaml(rule_groups()),
        "rules/tests/citation-drift.test.yml": to_yaml(rule_tests()),
    }
