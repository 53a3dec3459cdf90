"""Lookup mode on real components: PostgreSQL (scripts/postgres-local) and a real broker.

The lookup reads the layouts' own tables (tests/postgres_support.py) and must judge every
citation as a mirror of the same rows does; the service, started as a process with
``chunk_lookup`` set and no chunk topic at all, checks what arrives on the answer topic, sees a
change in the database once its TTL has passed, and when the database stops answering checks
nothing (no verdict, no commit, readiness down, the lookups' errors counted) until it answers
again, then checks every message that came meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import orjson
import psycopg
import pytest
from kafka_support import ExporterProcess, consume_citation_verdicts, create_topics, produce
from postgres_support import LANGCHAIN_V2_DDL, chunk_records, fill_langchain, fill_llamaindex

from exporter.checks.engine import Policy
from exporter.checks.lookup_cache import LookupCache
from exporter.checks.store import ChunkStore
from exporter.config.postgres import ChunkLayout
from exporter.errors import SourceUnavailable
from exporter.outputs.verdicts import verdict_json
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.postgres import PostgresChunks
from exporter.postgres.layouts import containment_probes, lookup_query
from exporter.postgres.lookup import PostgresLookup
from exporter.records.decode import decode_chunk, parse_json
from exporter.records.limits import DEFAULT_LIMITS
from exporter.settings import load_settings
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A store after a re-index and the citations of answers written before it."""
    folder = tmp_path_factory.mktemp("scenario")
    return write_scenario(build_scenario(ScenarioConfig(seed=26, answers=400)), folder)


def _mirror_of(uri: str, layout: ChunkLayout) -> Pipeline:
    """A mirror of the rows, read as the sweep reads them."""
    store = ChunkStore()
    for _, record in PostgresChunks(uri, layout).records(DEFAULT_LIMITS.max_message_bytes):
        assert isinstance(record, bytes)
        store.apply(decode_chunk(parse_json(record)))
    return Pipeline(store, Policy(), publish_all=True)


def _verdicts(pipeline: Pipeline, lines: list[bytes], batch: int = 50) -> list[bytes]:
    out: list[bytes] = []
    records = [LocalRecord("answers", 0, n, None, line) for n, line in enumerate(lines)]
    for start in range(0, len(records), batch):
        part = records[start : start + batch]
        asyncio.run(pipeline.prepare(part))
        for record in part:
            outcome = pipeline.answer(record)
            out += [verdict_json(checked.verdict) for checked in outcome.checked]
    return out


@pytest.mark.parametrize("layout", ["langchain", "llamaindex", "llamaindex-jsonb", "query"])
def test_a_lookup_judges_as_a_mirror_of_the_same_rows(
    database: str, scenario: dict[str, Path], layout: str
) -> None:
    rows = chunk_records(scenario["chunks"])
    if layout == "langchain":
        fill_langchain(database, rows, collection="support-docs")
        chunk_layout = ChunkLayout.of("langchain", collection="support-docs")
    elif layout.startswith("llamaindex"):
        fill_llamaindex(database, rows, table="data_support", jsonb=layout.endswith("jsonb"))
        chunk_layout = ChunkLayout.of("llamaindex", table="data_support")
    else:
        with psycopg.connect(database) as connection:
            connection.execute(
                "CREATE TABLE kb (chunk_id text PRIMARY KEY, doc_id text, doc_version text, "
                "body text, doc_offset integer)"
            )
            with connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO kb VALUES (%(chunk_id)s, %(doc_id)s, %(doc_version)s, "
                    "%(text)s, %(doc_offset)s)",
                    [{"doc_offset": None, **row} for row in rows],
                )
        query = (
            "SELECT chunk_id, doc_id, doc_version, body AS text, doc_offset FROM kb "
            "WHERE body NOT LIKE '%never%' ORDER BY chunk_id;"
        )
        chunk_layout = ChunkLayout.of("query", query=query)
    lines = scenario["citations"].read_bytes().splitlines()
    lines.insert(7, _answer(0, "no-such-document", [0, 3], "The")[1])
    cache = LookupCache()
    lookup = PostgresLookup(database, chunk_layout, cache, DEFAULT_LIMITS)
    asyncio.run(lookup.check())
    try:
        looked_up = _verdicts(Pipeline(cache, Policy(), publish_all=True, lookup=lookup), lines)
    finally:
        lookup.close()
    mirrored = _verdicts(_mirror_of(database, chunk_layout), lines)
    assert looked_up == mirrored
    statuses = {orjson.loads(line)["status"] for line in looked_up}
    assert {"ok", "drift_repaired", "document_missing"} <= statuses  # a test that can fail


@pytest.mark.parametrize(
    ("layout", "index"), [("langchain", "ix_cmetadata_gin"), ("llamaindex", "data_kb_idx_1")]
)
def test_a_documents_lookup_goes_through_the_index_the_library_makes(
    database: str, layout: str, index: str
) -> None:
    """LangChain's GIN index on cmetadata (one @> probe per document), LlamaIndex's btree on
    ref_doc_id: the lookup of a few documents in a large table never reads every row."""
    rows = [
        {"chunk_id": f"d{n}#0", "doc_id": f"d{n}", "doc_version": "v1", "text": f"text {n}"}
        for n in range(5_000)
    ]
    if layout == "langchain":
        fill_langchain(database, rows)
        chunk_layout, table = ChunkLayout.of("langchain"), "langchain_pg_embedding"
    else:
        fill_llamaindex(database, rows, table="data_kb")
        chunk_layout, table = ChunkLayout.of("llamaindex", table="data_kb"), "data_kb"
    query = lookup_query(chunk_layout, 1000, "documents", containment=layout == "langchain")
    ids = ["d7", "d9"]
    with psycopg.connect(database, autocommit=True) as connection:
        # what autovacuum does after a load: GIN's pending list merged, statistics gathered
        connection.execute(
            psycopg.sql.SQL("VACUUM ANALYZE {}").format(psycopg.sql.Identifier(table))
        )
        explained = connection.execute(
            psycopg.sql.SQL("EXPLAIN ") + query.statement,
            {**query.params, "ids": ids, "probes": containment_probes("source", ids)},
        ).fetchall()
    plan = "\n".join(row[0] for row in explained)
    assert index in plan, plan
    assert f"Seq Scan on {table}" not in plan, plan


def test_pgvectorstore_keys_are_uuids_and_other_ids_are_never_sent(database: str) -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    with psycopg.connect(database) as connection:
        connection.execute(LANGCHAIN_V2_DDL.format(table="kb_v2"))
        for key, text in ((first, "The refund window is thirty days."), (second, "Other.")):
            connection.execute(
                "INSERT INTO kb_v2 VALUES (%s, %s, %s, %s)",
                (key, text, [0.1], json.dumps({"source": "d", "doc_version": "v1"})),
            )
    cache = LookupCache()
    lookup = PostgresLookup(
        database, ChunkLayout.of("langchain-v2", table="kb_v2"), cache, DEFAULT_LIMITS
    )
    lines = [
        orjson.dumps(
            {
                "citation_id": f"c{n}",
                "answer_id": "a",
                "doc_id": "d",
                "doc_version": "v1",
                "chunk_id": chunk_id,
                "chunk_span": [4, 17],
                "quote": "refund window",
            }
        )
        for n, chunk_id in enumerate([str(first), "not-a-uuid", str(first).upper()])
    ]
    try:
        verdicts = [
            orjson.loads(v) for v in _verdicts(Pipeline(cache, Policy(), lookup=lookup), lines)
        ]
    finally:
        lookup.close()
    # the first is at its span; the others name no chunk (a UUID's text is lower case), and
    # are found in their document all the same
    assert [v["status"] for v in verdicts] == ["ok", "drift_repaired", "drift_repaired"]


def test_a_lookup_of_a_database_that_refuses_says_why_in_one_line(database: str) -> None:
    layout = ChunkLayout.of("llamaindex", table="data_nowhere")
    lookup = PostgresLookup(database, layout, LookupCache(), DEFAULT_LIMITS)
    with pytest.raises(SourceUnavailable, match="no table data_nowhere"):
        asyncio.run(lookup.check())
    with psycopg.connect(database) as connection:
        connection.execute("CREATE TABLE kb (id text, body text)")
    own = ChunkLayout.of("query", query="SELECT id AS chunk_id, body AS text FROM kb")
    with pytest.raises(SourceUnavailable, match="name them so"):
        asyncio.run(PostgresLookup(database, own, LookupCache(), DEFAULT_LIMITS).check())
    wrong = database.replace("exporter@", "exporter:wrong-password@")
    with pytest.raises(SourceUnavailable) as raised:
        asyncio.run(PostgresLookup(wrong, layout, LookupCache(), DEFAULT_LIMITS).check())
    assert "wrong-password" not in str(raised.value) and "\n" not in str(raised.value)
    assert "password authentication failed" in str(raised.value)


def test_the_settings_the_docs_give_are_valid_settings(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "postgres.md").read_text()
    section = page[page.index("## Inline checks without a mirror") :]
    block = section[
        section.index("```toml\n") + 8 : section.index("```", section.index("```toml") + 7)
    ]
    config = tmp_path / "exporter.toml"
    config.write_text(block)
    settings = load_settings(config)
    layout = settings.chunk_layout
    assert (layout.name, layout.collection) == ("langchain", "support-docs")
    assert settings.chunk_lookup_ttl_seconds == 30
    assert settings.chunk_lookup is not None


TEXT = "The refund window is thirty days. Annual plans renew automatically each year."


def _answer(number: int, doc_id: str, span: list[int], quote: str) -> tuple[bytes, bytes]:
    record = {
        "citation_id": f"c{number}",
        "answer_id": f"a{number}",
        "doc_id": doc_id,
        "doc_version": "v1",
        "chunk_id": f"{doc_id}#0",
        "chunk_span": span,
        "quote": quote,
    }
    return f"a{number}".encode(), orjson.dumps(record)


def _refuse(admin: str, name: str, refuse: bool) -> None:
    """The database refuses every connection (and ends those it has), or takes them again."""
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(
            psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                psycopg.sql.Identifier(name), psycopg.sql.SQL("false" if refuse else "true")
            )
        )
        if refuse:
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )


def _statuses(bootstrap: str, topic: str, count: int) -> dict[str, str]:
    records = consume_citation_verdicts(bootstrap, topic, count, seconds=90.0)
    return {orjson.loads(r.value)["citation_id"]: orjson.loads(r.value)["status"] for r in records}


@pytest.mark.kafka
def test_the_service_looks_chunks_up_and_pauses_while_the_database_is_away(
    bootstrap: str, postgres: str, database: str, tmp_path: Path
) -> None:
    documents = 20
    fill_langchain(
        database,
        [
            {"chunk_id": f"d{n}#0", "doc_id": f"d{n}", "doc_version": "v1", "text": TEXT}
            for n in range(documents)
        ],
    )
    topics = create_topics(bootstrap, answer_partitions=2)
    service = ExporterProcess(
        bootstrap,
        topics,
        tmp_path / "exporter.log",
        chunk_lookup=database,
        chunks_layout="langchain",
        chunk_lookup_ttl_seconds="1",
        publish_all_verdicts="true",
        coverage="false",
    )
    name = database.rsplit("/", 1)[1]
    try:
        service.wait_ready()
        first = [_answer(n, f"d{n % documents}", [4, 17], "refund window") for n in range(40)]
        first.append(_answer(40, "gone", [0, 3], "The"))
        produce(bootstrap, topics.answers, first)
        service.wait_for("citation_checks_total", 41)
        seen = _statuses(bootstrap, topics.verdicts, 41)
        assert sum(status == "ok" for status in seen.values()) == 40
        assert seen["c40"] == "document_missing"

        # changed before the outage, while nothing was asked: the cached d1 is past its TTL
        # by the time the database answers again, so its citations see the change then
        with psycopg.connect(database) as connection:
            connection.execute(
                "UPDATE langchain_pg_embedding SET document = '## ' || document WHERE id = 'd1#0'"
            )
        _refuse(postgres, name, refuse=True)
        outage = [_answer(n, f"d{n % documents}", [4, 17], "refund window") for n in range(41, 81)]
        produce(bootstrap, topics.answers, outage)
        service.wait_for("citation_lookups_total", 2, result="error")
        deadline = time.monotonic() + 30
        while service.readiness()[0] != 503 and time.monotonic() < deadline:
            time.sleep(0.2)
        status, sentence = service.readiness()
        assert status == 503 and name in sentence and "cannot connect" in sentence, sentence
        checked = service.wait_for("citation_checks_total", 41)
        assert checked == 41  # nothing of the batches that came meanwhile was checked

        _refuse(postgres, name, refuse=False)
        service.wait_for("citation_checks_total", 81, seconds=90)
        service.wait_ready()
        seen = _statuses(bootstrap, topics.verdicts, 81)
        assert len(seen) == 81
        again = {cid: status for cid, status in seen.items() if int(cid[1:]) > 40}
        assert len(again) == 40
        assert "document_missing" not in again.values()
        # d1 changed: its citations see the change
        moved = {f"c{n}" for n in range(41, 81) if n % documents == 1}
        assert {again[cid] for cid in moved} == {"drift_repaired"}
        assert {again[cid] for cid in set(again) - moved} == {"ok"}
    finally:
        service.stop()
        _refuse(postgres, name, refuse=False)
    log = (tmp_path / "exporter.log").read_text()
    assert "answers again: checking resumes" in log
