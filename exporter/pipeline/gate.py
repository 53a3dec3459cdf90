"""The deploy gate: the lines a sweep may not cross, and which of them it crossed.

A reader is let down as much by a citation whose document is gone as by one whose span points
at other text, so the gate has a line for each: drift (all of it, or for teams that apply the
repairs automatically, only the drift that could not be repaired) and missing documents. A
re-index that lost 30% of its documents once passed with drift at 0%. A third line counts the
citations that could not be checked at all (invalid records): an archive 95% of whose records
broke the contract once passed, judged by its one valid citation. Exit status 1 stays "the gate
failed", whichever line was crossed; the summary says which.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DRIFT", "INVALID", "MISSING", "UNREPAIRED", "Gate", "GateLine", "GateResult"]

# What a line measures, as the summaries name it.
DRIFT = "drift"
UNREPAIRED = "unrepaired drift"
MISSING = "missing documents"
INVALID = "invalid records"


@dataclass(frozen=True, slots=True)
class Gate:
    """The lines, as shares of the valid citations (0.01 is 1%); invalid records as a share of
    all the citations read."""

    drift_above: float = 0.01
    # by default the drift gate's line: a vanished document is as broken as a drifted span
    missing_above: float = 0.01
    # by default the drift gate's line too: a citation nobody could check may be drifted
    invalid_above: float = 0.01
    # gate on the drift that was not repaired alone (the repairs are applied automatically)
    unrepaired_only: bool = False
    # pass when nothing valid was read (else such a sweep fails: a wrong or truncated file)
    allow_empty: bool = True


@dataclass(frozen=True, slots=True)
class GateLine:
    """One line of the gate: what it measures, the measured share, and the line."""

    name: str
    ratio: float
    limit: float
    # why the line is not read: a sweep with no chunk loaded makes every document "missing",
    # and allow_empty passes a sweep with nothing to judge by
    waived: str | None = None

    @property
    def crossed(self) -> bool:
        return self.waived is None and self.ratio > self.limit


@dataclass(frozen=True, slots=True)
class GateResult:
    """What the gate decided; ``empty`` says why nothing could be judged, when it counts."""

    lines: tuple[GateLine, ...]
    empty: str | None = None

    @property
    def passed(self) -> bool:
        return self.empty is None and not self.crossed

    @property
    def crossed(self) -> tuple[GateLine, ...]:
        return tuple(line for line in self.lines if line.crossed)

    def verdict(self) -> str:
        """The gate's verdict as the summaries end with it: PASS, or FAIL and why."""
        return "PASS" if self.passed else f"FAIL ({self.why()})"

    def why(self) -> str:
        """Which lines were crossed, in a few words (empty when it passed)."""
        reasons = [f"{line.name} {line.ratio:.2%} above {line.limit:.2%}" for line in self.crossed]
        if self.empty is not None:
            reasons.insert(0, self.empty)
        return "; ".join(reasons)
