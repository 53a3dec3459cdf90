"""The ``citation-exporter`` command: arguments in, wiring out; no business logic here.

One module per subcommand, each with ``add_parser(commands)`` and ``run(args)``. Exit codes are
part of the contract, so a deploy pipeline can gate on ``sweep``: 0 drift within the gate,
1 drift above ``--fail-above``, 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from exporter import __version__
from exporter.cli import demo, produce, run, simulate, sweep
from exporter.cli.common import EXIT_USAGE, UsageError

__all__ = ["main"]

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sweep": sweep.run,
    "demo": demo.run,
    "run": run.run,
    "produce": produce.run,
    "simulate": simulate.run,
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="citation-exporter",
        description="Keep the citations of a RAG system honest: check stored citations against "
        "the live document store, repair drifted offsets, and tell drift from superseded "
        "documents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (sweep, demo, run, produce, simulate):
        module.add_parser(commands)
    return parser


def _fail(message: str) -> NoReturn:
    print(f"citation-exporter: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except UsageError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        print("citation-exporter: interrupted", file=sys.stderr)
        return 130
