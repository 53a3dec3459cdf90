"""Judges that need more than the lexical comparison: a model behind an HTTP endpoint."""

from exporter.config.judge import OpenAIJudgeConfig
from exporter.judge.labels import parse_label
from exporter.judge.openai import OpenAIJudge

__all__ = ["OpenAIJudge", "OpenAIJudgeConfig", "parse_label"]
