"""The ``citation-exporter`` command: arguments in, wiring out; no business logic here.

One module per subcommand, each with ``add_parser(commands)`` and ``run(args)``. Exit codes are
part of the contract, so a deploy pipeline can gate on ``sweep``: 0 no line of the gate
crossed, 1 the gate failed (drift, missing documents or invalid records above their lines) and
nothing else, 2 usage error, unreadable input or unwritable output, 3 internal error. No
exception ends the process with Python's own status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from exporter import __version__
from exporter.cli import apply, capture, demo, produce, report, run, simulate, sweep
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
    "apply": apply.run,
    "capture": capture.run,
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
    # not required: with no command, _no_command lists them (argparse would only name COMMAND)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (sweep, report, apply, capture, demo, run, produce, simulate):
        module.add_parser(commands)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any]:
    """The parser's subcommands (argparse keeps them nowhere public)."""
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0]


def _no_command(parser: argparse.ArgumentParser) -> NoReturn:
    """What a user typing the bare command needs: the commands, what each is for, where to
    start."""
    choices = _subcommands(parser)._choices_actions  # each command's help
    listed = [f"  {action.dest:<9} {action.help}" for action in choices]
    print(parser.format_usage().rstrip(), file=sys.stderr)
    print("citation-exporter: error: name a command:", *listed, sep="\n", file=sys.stderr)
    print(
        "new here? 'citation-exporter demo' shows the exporter at work, no Kafka needed; "
        "'citation-exporter COMMAND --help' explains one command",
        file=sys.stderr,
    )
    raise SystemExit(EXIT_USAGE)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, or exit 2 with a message that says what to type instead."""
    parser = _build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None and not extra:
        _no_command(parser)
    if extra:
        command = args.command
        if command is None:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        sub = _subcommands(parser).choices[command]
        words = " ".join(extra)
        hint = _SPARE_WORDS.get(command) if not any(w.startswith("-") for w in extra) else None
        sub.error(
            f"unrecognized arguments: {words}"
            + (f" ({hint})" if hint else f" (see 'citation-exporter {command} --help')")
        )
    return args


# What a command's stray words most likely meant: files named without their flags.
_SPARE_WORDS = {
    "sweep": "sweep takes its files by flag: --chunks FILE --citations FILE",
    "run": "run takes a file to replay by flag: --source FILE",
}


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
    args = _parse(argv)
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
