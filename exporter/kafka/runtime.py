"""The long-running exporter: wiring, start-up, retries with backoff, and a clean stop.

Start-up order matters: ``/metrics`` first (so a broken broker is visible), then the chunk store
is loaded from the beginning of the chunk topic, and only then does the answer consumer join
its group. A broker outage never ends the process: every Kafka error is retried with backoff
while ``/metrics`` keeps answering, and its cause (a wrong password, an untrusted CA, a missing
client certificate, nothing listening) is found out, logged in one line when it changes, and
served by ``/healthz`` and ``/readyz``. SIGTERM/SIGINT stop fetching, finish and commit the
batch in hand, flush the producer and return.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry

from exporter import __version__
from exporter.checks.lookup_cache import LookupCache
from exporter.checks.store import ChunkStore
from exporter.config.kafka import KafkaConnection
from exporter.entailment.background import BackgroundJudge, HourlyBudget
from exporter.entailment.judging import model_judge, sample_judging
from exporter.entailment.lexical import LexicalJudge
from exporter.errors import RestartRequired, SourceUnavailable
from exporter.kafka.answers import AnswerChecker
from exporter.kafka.chunks import ChunkFollower
from exporter.kafka.clients import close, make_consumer, make_producer, topic_partitions
from exporter.kafka.control import ControlListener
from exporter.kafka.diagnose import diagnose
from exporter.kafka.group_sweep import GroupSweeper, ProgressFollower, RequestListener
from exporter.kafka.publish import Publisher
from exporter.kafka.sweep_progress import MAX_SWEEP_ID_CHARS, SweepBook
from exporter.kafka.sweeps_topic import prepare_sweeps_topic
from exporter.kafka.topic_sweep import SweepRunner
from exporter.memory import freeze_long_lived
from exporter.outputs.state import ExporterState
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import DeadLetter
from exporter.pipeline.reindex import ReindexWatch
from exporter.records.limits import preview
from exporter.settings import Settings
from exporter.web.exposition import expose
from exporter.web.heartbeat import Heartbeat

if TYPE_CHECKING:
    from exporter.postgres.lookup import PostgresLookup

__all__ = ["Exporter"]

log = logging.getLogger(__name__)

_MAX_BACKOFF_SECONDS = 30.0
# On SIGTERM, how long the batch in hand (and then its commit) may take to finish.
SHUTDOWN_GRACE_SECONDS = 10.0
# How often a running exporter checks that the broker can still be used.
CONNECTION_CHECK_SECONDS = 30.0
_T = TypeVar("_T")
# The same problem is logged again after this long (a reminder during a long outage).
_PROBLEM_REMINDER_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class KafkaClients:
    """Where the exporter's Kafka clients come from: the seam its tests pass fakes through.

    ``consumer(connection, role, group_id=None)`` and ``producer(connection)`` make clients;
    ``diagnose(connection)`` says why the broker cannot be used (None: it can);
    ``prepare_sweeps_topic(connection, topic, replicas)`` makes sure the shared sweeps' topic
    exists.
    """

    consumer: Callable[..., AIOKafkaConsumer] = make_consumer
    producer: Callable[[KafkaConnection], AIOKafkaProducer] = make_producer
    diagnose: Callable[[KafkaConnection], Awaitable[str | None]] = diagnose
    prepare_sweeps_topic: Callable[[KafkaConnection, str, int | None], Awaitable[None]] = (
        prepare_sweeps_topic
    )


@dataclass(frozen=True, slots=True)
class _Shared:
    """The clients a sweep the group shares uses besides the service's own."""

    producer: AIOKafkaProducer
    control: AIOKafkaConsumer
    answers: AIOKafkaConsumer
    progress: AIOKafkaConsumer


def _clients(
    settings: Settings, make: KafkaClients
) -> tuple[AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaConsumer, AIOKafkaConsumer, _Shared | None]:
    """The service's clients: the producer and the chunk, answer and control consumers, and
    those of a sweep the group shares unless ``share_sweeps`` is off (its control consumer is
    in no group then: every instance reads every request)."""
    connection = settings.kafka
    producer = make.producer(connection)
    chunks = make.consumer(connection, "chunks")
    answers = make.consumer(connection, "answers", group_id=settings.group_id)
    shared = settings.shared_sweeps_topic is not None
    control = make.consumer(
        connection, "control", group_id=None if shared else f"{settings.group_id}.control"
    )
    sharing = None
    if shared:
        sharing = _Shared(producer, control, answers, make.consumer(connection, "sweeps"))
    return producer, chunks, answers, control, sharing


class Exporter:
    """One exporter process. ``await run(stop)`` until ``stop`` is set."""

    def __init__(
        self,
        settings: Settings,
        registry: CollectorRegistry | None = None,
        *,
        freeze_store: bool = False,
        clients: KafkaClients | None = None,
    ) -> None:
        """``freeze_store``: once loaded, hide the store from the cyclic garbage collector
        (:mod:`exporter.memory`); for the process that runs one exporter, not for tests.
        ``clients``: where the Kafka clients come from (the real ones by default)."""
        self.settings = settings
        self.clients = clients if clients is not None else KafkaClients()
        self._freeze_store = freeze_store
        # one source for readiness, the problem, the live store, lag and sweep progress: the
        # loops write it, /readyz, /healthz and the state gauges read it
        self.state = ExporterState(problem="starting: connecting to Kafka")
        self.policy = settings.policy
        self.heartbeat = Heartbeat()  # watched once run() starts it beating
        topics = [settings.chunks_topic, settings.answers_topic, settings.control_topic]
        exposed = expose(
            settings.exposure, self.state, topics, registry=registry, heartbeat=self.heartbeat
        )
        self.registry, self.metrics, self.http = exposed.registry, exposed.metrics, exposed.http
        self._logged_problem: tuple[str, float] | None = None
        # lookup mode: the database did not answer the last lookup (the problem is its)
        self._lookup_down = False

    @property
    def problem(self) -> str | None:
        """What keeps the exporter from working, in one sentence (None when nothing does)."""
        return self.state.problem

    def _report(self, problem: str, then: str = "retrying with backoff until it is fixed") -> None:
        """Serve ``problem`` on /healthz and /readyz; log it when new (or as a reminder)."""
        self.state.problem = problem
        now = time.monotonic()
        if self._logged_problem is not None:
            last, at = self._logged_problem
            if last == problem and now - at < _PROBLEM_REMINDER_SECONDS:
                return
        self._logged_problem = (problem, now)
        log.error("%s; %s", problem, then)

    async def run(self, stop: asyncio.Event) -> None:
        self.http.start()
        beating = asyncio.create_task(self.heartbeat.keep_beating(stop), name="heartbeat")
        log.info(
            "citation-drift-exporter %s: metrics on %s://%s:%d/metrics, Kafka at %s",
            __version__,
            self.http.scheme,
            self.settings.metrics_host,
            self.http.port,
            self.settings.bootstrap_servers,
        )
        try:
            await self._with_retries(stop, self._serve)
        finally:
            beating.cancel()
            self.http.stop()

    async def _with_retries(
        self, stop: asyncio.Event, body: Callable[[asyncio.Event], Awaitable[None]]
    ) -> None:
        backoff = _Backoff()
        while not stop.is_set():
            try:
                await body(stop)
                return
            except (KafkaError, OSError, RestartRequired) as exc:
                self._report(await self._explain(exc))
                await backoff.wait(stop, None)

    async def _explain(self, exc: BaseException) -> str:
        """What went wrong, found out by connecting again when the broker is the question."""
        if isinstance(exc, RestartRequired):
            return str(exc)
        try:
            cause = await self.clients.diagnose(self.settings.kafka)
        except Exception as probe_error:  # the probe must never be the next problem
            log.debug("diagnosis failed: %r", probe_error)
            cause = None
        return cause or f"Kafka unavailable: {type(exc).__name__}: {preview(str(exc))}"

    async def _serve(self, stop: asyncio.Event) -> None:
        settings = self.settings
        # a fresh store each time: tombstones compacted away while we were gone must not leave
        # deleted chunks behind. In lookup mode, the documents recent batches cited.
        store = self.state.store = self._new_store()
        producer, chunk_consumer, answer_consumer, control_consumer, sharing = _clients(
            settings, self.clients
        )
        # every client is stopped at the end, started or not: one that failed to start
        # still holds a connection pool, and warns "Unclosed" when collected
        clients: list[AIOKafkaProducer | AIOKafkaConsumer] = [
            producer,
            chunk_consumer,
            answer_consumer,
            control_consumer,
            *([] if sharing is None else [sharing.progress]),
        ]
        background: list[asyncio.Task[None]] = []
        publisher = Publisher(
            producer, settings.verdicts_topic, settings.dlq_topic, connector=settings.client_id
        )
        watch = ReindexWatch(
            settings.sweep_quiet_seconds,
            on_new_chunker=lambda _: setattr(self.state, "last_chunker_change", time.time()),
        )
        lookup = self._lookup(store)
        pipeline, sweeps = self._pipeline_and_sweeps(store, watch, producer, publisher, lookup)
        try:
            await self._store_ready(
                lookup,
                producer,
                chunk_consumer,
                pipeline,
                publisher=publisher,
                background=background,
                stop=stop,
            )
            if stop.is_set():
                return
            self.state.ready = True
            self._logged_problem = None  # a problem from now on is news
            if self._freeze_store:
                freeze_long_lived()
            watch.arm()
            for client in (answer_consumer, control_consumer):
                await client.start()
            reindex: Callable[[str], Awaitable[None]] | None
            if sharing is None:
                reindex = self._instance_sweeps(
                    control_consumer, sweeps, publisher, background, stop
                )
            else:
                shared = self._share_sweeps(sharing, pipeline, publisher, background, stop)
                reindex = await self._unless_stopped(shared, stop, "shared sweeps not set up")
                if reindex is None:
                    return
            background.append(
                asyncio.create_task(self._watch_reindex(watch, reindex, stop), name="re-index")
            )
            background.append(
                asyncio.create_task(self._watch_connection(stop), name="connection watch")
            )
            judging = self._background_judge(store, publisher)
            if judging is not None:
                background.append(asyncio.create_task(judging.run(stop), name="judge"))
            checker = AnswerChecker(
                answer_consumer,
                settings.answers_topic,
                pipeline=pipeline,
                metrics=self.metrics,
                publisher=publisher,
                judging=judging,
            )
            checker.subscribe()
            await self._check(checker, background, stop, lookup)
            try:
                await asyncio.wait_for(checker.commit(), SHUTDOWN_GRACE_SECONDS)
            except TimeoutError:
                log.warning("stopping: offsets not committed in time; the last batch is read again")
        finally:
            self.state.ready = False
            if lookup is not None:
                lookup.close()
            await sweeps.stop()
            for task in background:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for client in reversed(clients):
                await close(client)

    def _new_store(self) -> ChunkStore:
        """An empty store: the mirror of the chunk topic, or lookup mode's cache."""
        settings = self.settings
        if settings.chunk_lookup is None:
            return ChunkStore()
        return LookupCache(
            max_bytes=settings.chunk_lookup_cache_bytes,
            ttl_seconds=settings.chunk_lookup_ttl_seconds,
        )

    async def _store_ready(
        self,
        lookup: PostgresLookup | None,
        producer: AIOKafkaProducer,
        chunk_consumer: AIOKafkaConsumer,
        pipeline: Pipeline,
        *,
        publisher: Publisher,
        background: list[asyncio.Task[None]],
        stop: asyncio.Event,
    ) -> None:
        """Until the store can be checked against: in lookup mode, the database answers; in
        mirror mode, the store is loaded from the chunk topic's start (and then followed)."""
        if lookup is not None:
            await producer.start()
            await self._until_lookup_answers(lookup, stop)
            return
        settings = self.settings
        for client in (producer, chunk_consumer):
            await client.start()
        follower = ChunkFollower(chunk_consumer, settings.chunks_topic, pipeline, self.metrics)
        await follower.assign(
            await topic_partitions(producer, settings.chunks_topic, "chunks_topic", settings.kafka)
        )
        self.state.problem = None  # connected, and the store is loading: /readyz says so
        following = asyncio.create_task(
            self._follow(follower, publisher, stop), name="chunk follower"
        )
        background.append(following)
        await self._until_ready(follower, following, stop)

    def _lookup(self, store: ChunkStore) -> PostgresLookup | None:
        """Lookup mode's database reader over ``store`` (a LookupCache); None: mirror mode."""
        settings = self.settings
        if settings.chunk_lookup is None:
            return None
        assert isinstance(store, LookupCache)
        # psycopg, the postgres extra: settings made sure it is there
        from exporter.postgres.lookup import PostgresLookup  # noqa: PLC0415

        return PostgresLookup(
            settings.chunk_lookup.get_secret_value(),
            settings.chunk_layout,
            store,
            settings.limits,
            self.metrics,
        )

    async def _until_lookup_answers(self, lookup: PostgresLookup, stop: asyncio.Event) -> None:
        """Lookup mode's readiness: the database answers the layout's query."""
        backoff = _Backoff()
        while not stop.is_set():
            try:
                await lookup.check()
            except SourceUnavailable as exc:
                self._lookup_down = True
                self._report(str(exc))
                await backoff.wait(stop, None)
                continue
            self._lookup_answers(lookup)
            return

    def _lookup_answers(self, lookup: PostgresLookup) -> None:
        if self._lookup_down:
            log.warning("%s answers again: checking resumes", lookup.name)
        else:
            log.info("looking chunks up in %s (%s)", lookup.name, lookup.layout.describe())
        self._lookup_down = False
        self.state.problem, self._logged_problem = None, None

    def _pipeline_and_sweeps(
        self,
        store: ChunkStore,
        watch: ReindexWatch,
        producer: AIOKafkaProducer,
        publisher: Publisher,
        lookup: PostgresLookup | None,
    ) -> tuple[Pipeline, SweepRunner]:
        """The pipeline, and the sweeps of the answer topic that judge a sample of it."""
        settings = self.settings
        judging = sample_judging(settings.sweep_judging, settings.high_severity_topics)
        pipeline = Pipeline(
            store,
            self.policy,
            publish_all=settings.publish_all_verdicts,
            watch=watch,
            sweep_judge_rate=0.0 if judging is None else 1.0,
            change_columns=settings.change_columns,
            lookup=lookup,
        )
        sweeps = SweepRunner(
            lambda: make_consumer(settings.kafka, "sweep"),
            settings.answers_topic,
            lambda: topic_partitions(
                producer, settings.answers_topic, "answers_topic", settings.kafka
            ),
            pipeline=lambda: pipeline,
            metrics=self.metrics,
            publisher=publisher,
            judging=judging,
        )
        return pipeline, sweeps

    def _background_judge(self, store: ChunkStore, publisher: Publisher) -> BackgroundJudge | None:
        """The judge behind the response, when a sample of live citations is to be judged."""
        settings = self.settings
        if not settings.judge_sample_rate:
            return None
        model, concurrency = model_judge(settings.model_judge)
        return BackgroundJudge(
            store=store,
            lexical=LexicalJudge(),
            model=model,
            metrics=self.metrics,
            publisher=publisher,
            high_severity_topics=settings.high_severity_topics,
            queue_size=settings.judge_queue_size,
            concurrency=concurrency,
            budget=HourlyBudget(settings.judge_budget_usd_per_hour),
        )

    async def _watch_connection(self, stop: asyncio.Event) -> None:
        """Find out, while running, when the broker can no longer be used, and why.

        The clients reconnect by themselves during an outage and raise nothing, so on their
        own an outage after start-up shows only as aiokafka's repeated lines. Every
        CONNECTION_CHECK_SECONDS the broker is connected to once more, as at start-up: a cause is
        logged once and served on /healthz and /readyz (readiness itself stays: the store is
        loaded and checking resumes by itself), and its end is logged too.
        """
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), CONNECTION_CHECK_SECONDS)
            if stop.is_set():
                return
            try:
                cause = await self.clients.diagnose(self.settings.kafka)
            except Exception as probe_error:  # the probe must never be the next problem
                log.debug("diagnosis failed: %r", probe_error)
                continue
            if cause is not None:
                self._report(cause, "checks resume by themselves once it is fixed")
            elif self.state.problem is not None and not self._lookup_down:
                log.warning("Kafka can be used again (%s)", self.state.problem)
                self.state.problem, self._logged_problem = None, None

    def _instance_sweeps(
        self,
        control_consumer: AIOKafkaConsumer,
        sweeps: SweepRunner,
        publisher: Publisher,
        background: list[asyncio.Task[None]],
        stop: asyncio.Event,
    ) -> Callable[[str], Awaitable[None]]:
        """Sweeps each instance runs alone over the whole archive (``share_sweeps`` off): a
        control request is taken by one instance of the group. Returns how a re-index asks
        for a sweep."""
        control = ControlListener(
            control_consumer, self.settings.control_topic, sweeps, self.metrics, publisher
        )
        control.subscribe()
        background.append(asyncio.create_task(control.run(stop), name="control listener"))

        async def reindex(chunker: str) -> None:
            sweeps.request(f"chunker changed to {chunker}")

        return reindex

    async def _share_sweeps(
        self,
        clients: _Shared,
        pipeline: Pipeline,
        publisher: Publisher,
        background: list[asyncio.Task[None]],
        stop: asyncio.Event,
    ) -> Callable[[str], Awaitable[None]]:
        """Sweeps the group shares through its sweeps topic (created if missing): its progress
        read to the end (what the group knew before this instance), then followed; every
        request read; this instance's partitions swept. Returns how a re-index asks for one."""
        settings = self.settings
        sweeps_topic, answers_topic = settings.shared_sweeps_topic, settings.answers_topic
        assert sweeps_topic is not None
        await self.clients.prepare_sweeps_topic(
            settings.kafka, sweeps_topic, settings.sweeps_topic_replication_factor
        )
        producer = clients.producer
        await clients.progress.start()

        async def write(key: bytes, value: bytes) -> None:
            await (await producer.send(sweeps_topic, value, key=key))

        def owned() -> set[int]:
            assignment = clients.answers.assignment()
            return {tp.partition for tp in assignment if tp.topic == answers_topic}

        book = SweepBook()
        sweeper = GroupSweeper(
            book=book,
            answers_topic=answers_topic,
            make_consumer=lambda: make_consumer(settings.kafka, "sweep"),
            owned=owned,
            partitions=lambda: topic_partitions(
                producer, answers_topic, "answers_topic", settings.kafka
            ),
            write=write,
            pipeline=lambda: pipeline,
            metrics=self.metrics,
            publisher=publisher,
            # a pod's name tells instances apart; the process id, those on one host
            owner=f"{settings.client_id}@{socket.gethostname()}/{os.getpid()}",
            judging=sample_judging(settings.sweep_judging, settings.high_severity_topics),
        )
        follower = ProgressFollower(
            clients.progress, sweeps_topic, book, self.metrics, sweeper.refresh
        )
        await follower.assign(
            await topic_partitions(producer, sweeps_topic, "sweeps_topic", settings.kafka)
        )
        await follower.load()
        requests = RequestListener(
            clients.control,
            settings.control_topic,
            sweeper,
            self.metrics,
            max_age_seconds=settings.sweep_request_max_age_seconds,
        )
        await requests.assign(
            await topic_partitions(
                producer, settings.control_topic, "control_topic", settings.kafka
            )
        )
        for name, task in (
            ("sweep progress", follower.run(stop)),
            ("sweep requests", requests.run(stop)),
            ("shared sweeps", sweeper.run(stop)),
        ):
            background.append(asyncio.create_task(task, name=name))

        async def reindex(chunker: str) -> None:
            await sweeper.request(
                f"reindex/{chunker}"[:MAX_SWEEP_ID_CHARS],
                f"chunker changed to {chunker}",
                time.time(),
            )

        return reindex

    @staticmethod
    async def _watch_reindex(
        watch: ReindexWatch, request: Callable[[str], Awaitable[None]], stop: asyncio.Event
    ) -> None:
        """Ask for a sweep once a re-index with a new chunker has gone quiet."""
        while not stop.is_set():
            chunker = watch.due()
            if chunker is not None:
                await request(chunker)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    async def _until_ready(
        self, follower: ChunkFollower, following: asyncio.Task[None], stop: asyncio.Event
    ) -> None:
        waiters = {
            asyncio.create_task(follower.caught_up.wait()),
            asyncio.create_task(stop.wait()),
        }
        done, pending = await asyncio.wait(
            waiters | {following}, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending - {following}:
            task.cancel()
        if following in done:
            following.result()  # re-raises what stopped the chunk follower

    async def _follow(
        self, follower: ChunkFollower, publisher: Publisher, stop: asyncio.Event
    ) -> None:
        backoff = _Backoff()
        while not stop.is_set():
            dead = await follower.poll()
            while dead and not stop.is_set():
                try:
                    await self._dead_letters(publisher, dead)
                    dead = []
                except KafkaError as exc:
                    await backoff.wait(
                        stop, f"dead letters of the chunk topic not delivered: {exc}"
                    )

    @staticmethod
    async def _dead_letters(publisher: Publisher, letters: list[DeadLetter]) -> None:
        await publisher.delivered([await publisher.dead_letter(letter) for letter in letters])

    async def _check(
        self,
        checker: AnswerChecker,
        background: list[asyncio.Task[None]],
        stop: asyncio.Event,
        lookup: PostgresLookup | None = None,
    ) -> None:
        backoff = _Backoff()
        while not stop.is_set():
            for task in background:
                if task.done() and not stop.is_set():
                    task.result()  # a background loop failed: restart everything
                    raise RestartRequired(f"{task.get_name()} stopped")
            try:
                await self._unless_stopped(checker.poll(), stop)
                backoff.reset()
            except KafkaError as exc:
                await backoff.wait(stop, f"verdicts not delivered, batch will be re-checked: {exc}")
            except SourceUnavailable as exc:
                # nothing of the batch was checked: it is fetched again once the database answers
                self._lookup_down = True
                self.state.ready = False
                self._report(str(exc), "checking paused, retrying with backoff")
                await backoff.wait(stop, None)
                continue
            if self._lookup_down and lookup is not None:
                self._lookup_answers(lookup)
                self.state.ready = True

    @staticmethod
    async def _unless_stopped(
        work: Awaitable[_T],
        stop: asyncio.Event,
        left: str = "the batch in hand is left to be checked again",
    ) -> _T | None:
        """``work``, given SHUTDOWN_GRACE_SECONDS to finish once ``stop`` is set, then cancelled
        (None then, and ``left`` logged).

        A poll blocks without a timeout while the consumer group has no coordinator (a broker
        outage at the wrong moment), and setting up shared sweeps waits for the broker: SIGTERM
        must still end the process. A batch in hand normally finishes and is committed; one cut
        short is checked again (at least once).
        """
        task = asyncio.ensure_future(work)
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                await asyncio.wait({task}, timeout=SHUTDOWN_GRACE_SECONDS)
        finally:
            stopping.cancel()
            if not task.done():
                task.cancel()
                log.warning("stopping: %s", left)
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            return None
        return task.result()  # its errors are the caller's (a KafkaError is retried)


class _Backoff:
    """Exponential backoff between retries, cut short by ``stop``."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._seconds = 0.5

    async def wait(self, stop: asyncio.Event, why: str | None) -> None:
        """Wait before the next attempt; ``why`` is logged (None: the caller logged it)."""
        if why is not None:
            log.error("%s; retrying in %.1f s", why, self._seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), self._seconds)
        self._seconds = min(_MAX_BACKOFF_SECONDS, self._seconds * 2)
