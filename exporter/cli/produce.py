"""``citation-exporter produce``: a simulated scenario onto the Kafka topics."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from exporter.cli.common import EXIT_OK, UsageError

EXAMPLES = """\
examples:
  citation-exporter simulate --out /tmp/scenario --answers 20000
  citation-exporter produce --scenario /tmp/scenario --bootstrap-servers 127.0.0.1:19092 \\
      --create-topics 4 --rate 2000
"""


def add_parser(commands: Any) -> None:
    produce = commands.add_parser(
        "produce",
        help="send a simulated scenario to the Kafka topics, to watch the exporter react",
        description="Send a scenario written by 'simulate' to the topics the exporter reads: "
        "the original chunks and half of the answers, then the re-index (new chunker, "
        "re-extraction, refresh, deletions), then the other half of the answers. Topic names "
        "and security come from the same settings as 'run'.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    produce.add_argument(
        "--scenario",
        type=Path,
        metavar="DIR",
        required=True,
        help="a directory written by 'citation-exporter simulate'",
    )
    produce.add_argument("--config", type=Path, metavar="FILE", help="TOML file of settings")
    produce.add_argument("--bootstrap-servers", metavar="HOSTS", help="Kafka brokers")
    produce.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="N",
        help="citations per second (default: as fast as possible)",
    )
    produce.add_argument(
        "--create-topics",
        type=int,
        metavar="PARTITIONS",
        help="create the topics first, with this many partitions",
    )
    produce.add_argument(
        "--sweep", action="store_true", help="finish with a sweep request on the control topic"
    )


def run(args: argparse.Namespace) -> int:
    # imported here for the same reason as in _run_exporter
    from aiokafka.errors import KafkaError  # noqa: PLC0415

    from exporter.kafka.diagnose import diagnose  # noqa: PLC0415
    from exporter.kafka.logs import configure_logging  # noqa: PLC0415
    from exporter.kafka.produce import (  # noqa: PLC0415
        ProducePlan,
        create_topics,
        produce_scenario,
    )
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    overrides = {"bootstrap_servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    try:
        settings = load_settings(args.config, **overrides)
        plan = ProducePlan.from_scenario(args.scenario)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read the scenario in {args.scenario}: {exc}") from None
    configure_logging("INFO")

    async def send() -> dict[str, int]:
        if args.create_topics:
            await create_topics(settings.kafka, settings.kafka_topics, args.create_topics)
        return await produce_scenario(
            settings.kafka, settings.kafka_topics, plan, rate=args.rate, sweep_after=args.sweep
        )

    async def why() -> str | None:
        return await diagnose(settings.kafka)

    try:
        counts = asyncio.run(send())
    except KafkaError as exc:
        # the broker, not a bug: say what is wrong with it, as `run` does
        raise UsageError(asyncio.run(why()) or f"Kafka: {type(exc).__name__}: {exc}") from None
    print(", ".join(f"{name.replace('_', ' ')}: {count:,}" for name, count in counts.items()))
    return EXIT_OK
