"""What every subcommand shares: exit codes, the usage error, argument types."""

from __future__ import annotations

import argparse
import os

__all__ = [
    "EXIT_GATE_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "available_cpus",
    "positive",
    "ratio",
    "threshold",
    "topics",
]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A problem with the command line or its files: exit 2 with a one-line message."""


def ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a ratio between 0 and 1, got {text}")
    return value


def threshold(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 100.0:
        raise argparse.ArgumentTypeError(f"must be a similarity in (0, 100], got {text}")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def topics(text: str) -> frozenset[str]:
    return frozenset(t.strip() for t in text.split(",") if t.strip())
