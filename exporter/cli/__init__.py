"""The ``citation-exporter`` command: arguments in, wiring out; no business logic here.

One module per subcommand, each with ``add_parser(commands)`` and ``run(args)``. Exit codes are
part of the contract, so a deploy pipeline can gate on ``sweep``: 0 no line of the gate
crossed, 1 the gate failed (drift or missing documents above their lines) and nothing else, 2
usage error, unreadable input or unwritable output, 3 internal error. No exception ends the
process with Python's own status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from exporter import __version__
from exporter.cli import demo, produce, report, run, simulate, sweep
from exporter.cli.common import EXIT_CODES, EXIT_INTERNAL, EXIT_USAGE, UsageError
from exporter.memory import tune_collector

__all__ = ["main"]

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sweep": sweep.run,
    "report": report.run,
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
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (sweep, report, demo, run, produce, simulate):
        module.add_parser(commands)
    return parser


def _fail(message: str) -> NoReturn:
    print(f"citation-exporter: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _cancelled() -> type[BaseException]:
    """asyncio's CancelledError (a BaseException) without importing asyncio for every command."""
    asyncio = sys.modules.get("asyncio")
    return asyncio.CancelledError if asyncio is not None else Exception


def _flush_stdout() -> None:
    """Flush standard output now, so a full disk or a closed pipe is an error we report."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        # nothing more can reach stdout; keep the interpreter's own flush at exit quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise UsageError(f"cannot write to standard output: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _build_parser().parse_args(argv)
    tune_collector()
    try:
        status = _COMMANDS[args.command](args)
        _flush_stdout()
        return status
    except UsageError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        print("citation-exporter: interrupted", file=sys.stderr)
        return 130
    except (Exception, BaseExceptionGroup, _cancelled()) as exc:
        # a bug: say so, with the traceback, and never exit 1 (that is the gate's)
        traceback.print_exc()
        print(
            f"citation-exporter: internal error ({type(exc).__name__}); this is a bug, the "
            "traceback above says where",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
