"""``citation-exporter apply``: the sweep's verdicts acted on, in a table or an archive.

A dry run by default (what would change, conflicts, skips); ``--commit`` applies. The same
verdicts applied twice change nothing the second time; a citation changed since the sweep is a
conflict, left alone; ``--revert SWEEP`` puts back what a sweep's apply changed.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from exporter.cli.common import EXIT_OK, UsageError
from exporter.cli.sources import add_citation_table_arguments, citation_mapping
from exporter.config.postgres import CitationTable, is_postgres_uri
from exporter.errors import InputError, OutputError, SettingsError
from exporter.pipeline.repairs import ApplyPolicy, Tally
from exporter.records.limits import DEFAULT_LIMITS

__all__ = ["add_parser", "run"]

EXAMPLES = """\
examples:
  # what the sweep's verdicts would change in the application's table (nothing is written)
  citation-exporter apply verdicts.jsonl --to postgresql://app@db/app \\
      --citations-mapping citations.toml
  # apply them, then undo them
  citation-exporter apply verdicts.jsonl --to postgresql://app@db/app \\
      --citations-mapping citations.toml --commit
  citation-exporter apply --revert sweep-1a2b3c4d5e6f --to postgresql://app@db/app \\
      --citations-mapping citations.toml --commit
  # a repaired copy of a JSON Lines archive (never changed in place)
  citation-exporter apply verdicts.jsonl --to citations.jsonl --out repaired.jsonl --commit
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "apply",
        help="act on a sweep's verdicts: rewrite drifted offsets, pin superseded versions, "
        "mark the rest (a dry run unless --commit)",
        description="Act on the verdicts of a sweep (its --out files, .gz too) in the citations "
        "they judged: rewrite_offsets sets the repaired chunk_id and chunk_span, "
        "pin_archived_version sets pinned_version, degrade_to_document, drop_citation and "
        "suppress_claim set degraded, dropped and suppressed; every change sets repair_sweep and "
        "repaired_at, and nothing is deleted. A citation is changed only while it holds what "
        "the sweep saw (chunk_id, chunk_span, doc_version, quote); one changed since is a "
        "conflict, left alone. Without --commit nothing is written.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("verdicts", nargs="*", metavar="VERDICTS", help="the sweep's verdicts")
    parser.add_argument(
        "--to",
        required=True,
        metavar="TARGET",
        help="postgresql://... (the citations table, mapped as the sweep reads it) or a JSON "
        "Lines archive of citations or answer events (with --out)",
    )
    parser.add_argument("--out", metavar="FILE", help="with a JSON Lines archive: the copy")
    parser.add_argument("--commit", action="store_true", help="apply (default: a dry run)")
    parser.add_argument(
        "--revert", metavar="SWEEP", help="put back what apply changed for this sweep's id"
    )
    parser.add_argument(
        "--audit-table",
        default="citation_apply_audit",
        metavar="[SCHEMA.]TABLE",
        help="where every change is recorded, before and after (default: %(default)s; made "
        "when missing)",
    )
    parser.add_argument(
        "--only-how",
        metavar="HOW,...",
        help="rewrite only repairs told apart this way: unique, context, position_hint",
    )
    parser.add_argument(
        "--min-similarity",
        type=float,
        default=0.0,
        metavar="S",
        help="rewrite only repairs whose quote matched at least this similarity (0-100)",
    )
    parser.add_argument(
        "--never-suppress", action="store_true", help="leave suppress_claim verdicts alone"
    )
    parser.add_argument(
        "--now", metavar="TIME", help="repaired_at to write (RFC 3339; default: now)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    stream = parser.add_argument_group(
        "streaming (--from-kafka): the verdicts topic applied as it comes, until SIGTERM"
    )
    stream.add_argument(
        "--from-kafka",
        action="store_true",
        help="read the verdicts topic (its name and the connection from the settings, as "
        "'run' reads them) in a consumer group of its own; offsets are committed only after "
        "the transaction that applied them",
    )
    stream.add_argument("--config", type=Path, metavar="FILE", help="TOML file of settings")
    stream.add_argument("--bootstrap-servers", metavar="HOSTS", help="Kafka brokers")
    stream.add_argument(
        "--group-id", default="citation-apply", help="its consumer group (default: %(default)s)"
    )
    stream.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve its metrics on /metrics there (default: none)",
    )
    stream.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST")
    add_citation_table_arguments(parser)


HOWS = ("unique", "context", "position_hint")


def run(args: argparse.Namespace) -> int:
    """The command; what cannot be read or written is one line and exit 2."""
    try:
        return _run(args)
    except (InputError, OutputError) as exc:
        raise UsageError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    from exporter.files.repairs import read_changes, repair_archive  # noqa: PLC0415

    hows = frozenset(h.strip() for h in (args.only_how or "").split(",") if h.strip())
    unknown = sorted(hows - set(HOWS))
    if unknown:
        raise UsageError(f"--only-how {unknown[0]!r}: expected some of {', '.join(HOWS)}")
    policy = ApplyPolicy(hows, args.min_similarity, args.never_suppress)
    now = args.now or datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        datetime.fromisoformat(now)
    except ValueError:
        raise UsageError(f"--now {now[:40]!r}: expected an RFC 3339 time") from None
    database = is_postgres_uri(args.to)
    if args.from_kafka:
        if not database or args.verdicts or args.revert is not None:
            raise UsageError("--from-kafka takes no verdict files, and a postgresql:// target")
        return _stream(args, policy)
    if args.revert is not None:
        if not database or args.verdicts:
            raise UsageError("--revert SWEEP takes no verdict files, and a postgresql:// target")
        tally = _target(args).revert(args.revert, Tally(), commit=args.commit)
        _print(args, tally, args.revert, 0)
        return EXIT_OK
    if not args.verdicts:
        raise UsageError("apply needs the sweep's verdict files (or --revert SWEEP)")
    if not database and args.out is None:
        raise UsageError("--to ARCHIVE.jsonl needs --out REPAIRED.jsonl: never in place")
    changes = read_changes(args.verdicts, policy, DEFAULT_LIMITS.max_message_bytes)
    ordered = list(changes.by_citation.values())
    if database:
        tally = _target(args).apply(
            ordered, changes.tally, sweep=changes.sweep, now=now, commit=args.commit
        )
    elif args.commit:
        tally = repair_archive(args.to, args.out, changes, now, DEFAULT_LIMITS.max_message_bytes)
    else:
        tally = repair_archive(args.to, "/dev/null", changes, now, DEFAULT_LIMITS.max_message_bytes)
    _print(args, tally, changes.sweep, changes.verdicts)
    return EXIT_OK


def _stream(args: argparse.Namespace, policy: ApplyPolicy) -> int:
    import asyncio  # noqa: PLC0415 - only the streaming apply runs an event loop
    import signal  # noqa: PLC0415

    from prometheus_client import CollectorRegistry, start_http_server  # noqa: PLC0415

    from exporter.kafka.apply_stream import ApplyMetrics, stream_apply  # noqa: PLC0415
    from exporter.settings import load_settings  # noqa: PLC0415

    overrides = {"bootstrap_servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    try:
        settings = load_settings(args.config, **overrides)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    target = _target(args)
    registry = CollectorRegistry()
    metrics = ApplyMetrics(registry)
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_host, registry=registry)

    async def streaming() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        await stream_apply(
            settings.kafka,
            settings.verdicts_topic,
            target,
            policy,
            group_id=args.group_id,
            commit=args.commit,
            stop=stop,
            metrics=metrics,
        )

    asyncio.run(streaming())
    return EXIT_OK


def _target(args: argparse.Namespace) -> Any:
    try:
        from exporter.postgres.apply import PostgresTarget  # noqa: PLC0415 - the extra
    except ImportError as exc:
        raise UsageError(
            f"--to postgresql://... needs psycopg: pip install "
            f"'citation-drift-exporter[postgres]' ({exc})"
        ) from None
    return PostgresTarget(args.to, _mapping(args), args.audit_table)


def _mapping(args: argparse.Namespace) -> CitationTable:
    if args.citations_mapping is not None:
        return citation_mapping(Path(args.citations_mapping))
    try:
        return CitationTable.of(
            table=args.citations_table, query=args.citations_query, columns=args.citations_column
        )
    except SettingsError as exc:
        raise UsageError(str(exc).replace("--citations postgresql://...", "--to")) from None


def _print(args: argparse.Namespace, tally: Tally, sweep: str, verdicts: int) -> None:
    mode = "applied" if args.commit else "dry run: nothing written (--commit applies)"
    if args.format == "json":
        print(
            json.dumps(
                {
                    "sweep": sweep,
                    "committed": bool(args.commit),
                    "verdicts": verdicts,
                    "decisions": {f"{a} {d}": n for (a, d), n in sorted(tally.decisions.items())},
                    "skipped": dict(sorted(tally.skipped.items())),
                    "conflicts": tally.conflicts,
                    "not_found": tally.not_found,
                    "not_found_ids": tally.not_found_ids,
                    "examples": [
                        {"citation_id": c.citation_id, "action": c.action, "writes": dict(c.after)}
                        for c in tally.examples
                    ],
                },
                indent=1,
            )
        )
        return
    print(f"apply {sweep}: {verdicts:,} verdicts; {mode}")
    actions = sorted({action for action, _ in tally.decisions})
    for action in actions:
        made = {d: n for (a, d), n in tally.decisions.items() if a == action}
        print(
            f"  {action:<26} {made.get('apply', 0):>8,} {'applied' if args.commit else 'to apply'}"
            f", {made.get('already', 0):,} already, {made.get('conflict', 0):,} conflicts"
        )
    if tally.skipped:
        skipped = ", ".join(f"{n:,} {r}" for r, n in sorted(tally.skipped.items()))
        print(f"  skipped: {skipped}")
    for change in tally.examples:
        writes = ", ".join(f"{name} = {json.dumps(value)}" for name, value in change.after.items())
        print(f"  e.g. {change.citation_id} ({change.action}): {writes}")
    if tally.conflicts:
        shown = ", ".join(tally.conflicts)
        print(f"  conflicts (changed since the sweep, left alone): {shown}")
    if tally.not_found:
        print(f"  not found in the target: {tally.not_found:,} ({', '.join(tally.not_found_ids)})")
