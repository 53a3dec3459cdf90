"""Settings from the environment and a TOML file; invalid ones are named."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from exporter.settings import Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("CITATION_EXPORTER_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.chunks_topic == "rag.chunks"
    assert settings.answers_topic == "rag.answers"
    assert settings.verdicts_topic == "rag.citation-verdicts"
    assert settings.dlq_topic == "rag.citation-events.dlq"
    assert settings.control_topic == "rag.control"
    assert settings.threshold == 98.0
    assert settings.high_severity_topics == {"pricing", "security", "legal"}


def test_environment_variables_with_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    monkeypatch.setenv("CITATION_EXPORTER_HIGH_SEVERITY_TOPICS", "legal, medical")
    monkeypatch.setenv("CITATION_EXPORTER_SOURCES", "acme,globex")
    monkeypatch.setenv("CITATION_EXPORTER_SASL_PASSWORD", "hunter2")
    settings = load_settings()
    assert settings.bootstrap_servers == "k1:9092,k2:9092"
    assert settings.high_severity_topics == {"legal", "medical"}
    assert settings.sources == {"acme", "globex"}
    assert "hunter2" not in repr(settings), "secrets never appear in logs"


def test_toml_file_and_environment_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "exporter.toml"
    config.write_text('group_id = "from-file"\nmetrics_port = 9999\nthreshold = 97.5\n')
    monkeypatch.setenv("CITATION_EXPORTER_METRICS_PORT", "9100")
    settings = load_settings(config)
    assert (settings.group_id, settings.metrics_port, settings.threshold) == (
        "from-file",
        9100,
        97.5,
    )


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("CITATION_EXPORTER_THRESHOLD", "120", "threshold (CITATION_EXPORTER_THRESHOLD)"),
        ("CITATION_EXPORTER_METRICS_PORT", "http", "metrics_port"),
        ("CITATION_EXPORTER_SECURITY_PROTOCOL", "TLS", "security_protocol"),
        ("CITATION_EXPORTER_GROUP_ID", "", "group_id"),
        # found by a hostile review: a cost of inf, a deadline no model meets, a model name
        # of megabytes sent in every request
        ("CITATION_EXPORTER_JUDGE_PRICE_INPUT_PER_1K", "1e308", "judge_price_input_per_1k"),
        ("CITATION_EXPORTER_JUDGE_TIMEOUT_SECONDS", "1e-300", "judge_timeout_seconds"),
        ("CITATION_EXPORTER_JUDGE_MODEL", "m" * 10_000, "judge_model"),
    ],
)
def test_invalid_settings_are_named(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match="invalid settings") as error:
        load_settings()
    assert named in str(error.value)


def test_unknown_key_in_the_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "exporter.toml"
    config.write_text('bootstrap_server = "typo:9092"\n')
    with pytest.raises(SettingsError, match="unknown setting 'bootstrap_server'"):
        load_settings(config)


def test_an_invalid_value_names_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found walking the README: a bad value in the file was reported as its variable."""
    config = tmp_path / "exporter.toml"
    config.write_text('threshold = "abc"\nmetrics_port = 99999\n')
    with pytest.raises(SettingsError) as in_file:
        load_settings(config)
    assert f"threshold (in {config})" in str(in_file.value)
    with pytest.raises(SettingsError) as from_option:
        load_settings(config, metrics_port=70000)
    assert "metrics_port (--metrics-port)" in str(from_option.value)
    monkeypatch.setenv("CITATION_EXPORTER_THRESHOLD", "x")
    with pytest.raises(SettingsError) as from_variable:
        load_settings(config)
    assert "threshold (CITATION_EXPORTER_THRESHOLD)" in str(from_variable.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_settings_type_is_importable_without_side_effects() -> None:
    assert Settings.model_fields["bootstrap_servers"].default == "127.0.0.1:9092"


def test_config_file_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "exporter.toml"
    config.write_text('answers_topic = "prod.answers"\n')
    monkeypatch.setenv("CITATION_EXPORTER_CONFIG_FILE", str(config))
    assert load_settings().answers_topic == "prod.answers"


def test_the_docs_document_every_setting() -> None:
    import re

    page = (Path(__file__).resolve().parent.parent / "docs" / "exporter.md").read_text()
    table = page[page.index("## Settings\n") : page.index("## Metrics\n")]
    documented = set(re.findall(r"`([a-z_0-9]+)`", table))
    assert set(Settings.model_fields) <= documented


# ------------------------------------------------------------------ clients and SASL mechanisms


def test_kafka_client_defaults() -> None:
    settings = load_settings()
    assert settings.client_id == "citation-exporter"
    assert settings.kafka_options == {}
    assert settings.sasl_kerberos_service_name == "kafka"
    assert settings.sasl_kerberos_domain_name is None
    assert settings.sasl_oauth_token_file is None


@pytest.mark.parametrize("mechanism", [None, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms_need_a_username_and_password(mechanism: str | None) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism)
    assert f"sasl_mechanism {mechanism or 'PLAIN'} needs sasl_username and sasl_password" in str(
        error.value
    )


def test_oauthbearer_needs_a_token_file_and_no_password(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.\n")
    settings = load_settings(
        security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_file=token
    )
    assert settings.sasl_oauth_token_file == token
    with pytest.raises(
        SettingsError, match="sasl_mechanism OAUTHBEARER needs sasl_oauth_token_file"
    ):
        load_settings(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER")


@pytest.mark.parametrize(("content", "problem"), [(None, "does not exist"), (" \n", "is empty")])
def test_an_unusable_token_file_is_named_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, problem: str
) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    monkeypatch.setenv("CITATION_EXPORTER_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("CITATION_EXPORTER_SASL_MECHANISM", "OAUTHBEARER")
    monkeypatch.setenv("CITATION_EXPORTER_SASL_OAUTH_TOKEN_FILE", str(token))
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert str(error.value) == f"invalid settings: sasl_oauth_token_file {token} {problem}"


def test_gssapi_without_its_library_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # as where it is not installed
    with pytest.raises(SettingsError) as error:
        load_settings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")
    assert str(error.value) == (
        "invalid settings: sasl_mechanism GSSAPI needs the gssapi package and the system's "
        "Kerberos library: pip install 'citation-drift-exporter[gssapi]'"
    )


def test_gssapi_where_its_library_is_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))
    settings = load_settings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI",
        sasl_kerberos_domain_name="kafka.example.com",
    )
    assert (settings.sasl_kerberos_service_name, settings.sasl_kerberos_domain_name) == (
        "kafka",
        "kafka.example.com",
    )


def test_kafka_options_from_a_json_variable_and_a_toml_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "exporter.toml"
    config.write_text('[kafka_options]\nsession_timeout_ms = 45000\ncompression_type = "zstd"\n')
    assert load_settings(config).kafka_options == {
        "session_timeout_ms": 45000,
        "compression_type": "zstd",
    }
    monkeypatch.setenv(
        "CITATION_EXPORTER_KAFKA_OPTIONS", '{"check_crcs": false, "metadata_max_age_ms": 60000}'
    )
    options = load_settings(config).kafka_options
    assert options == {"check_crcs": False, "metadata_max_age_ms": 60000}
    assert type(options["check_crcs"]) is bool and type(options["metadata_max_age_ms"]) is int


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ('{"group_id": "g"}', "'group_id' is set by the exporter (use the group_id setting)"),
        (
            '{"sasl_plain_password": "x"}',
            "'sasl_plain_password' is set by the exporter (use the sasl_password setting)",
        ),
        (
            '{"enable_auto_commit": true}',
            "'enable_auto_commit' is set by the exporter (offsets are committed only once",
        ),
        ('{"acks": 1}', "'acks' is set by the exporter (verdicts and dead letters are sent"),
        (
            '{"session_timeout": 1}',
            "'session_timeout' is no option of aiokafka's clients (did you mean "
            "session_timeout_ms?)",
        ),
        ('{"linger": 5}', "'linger' is no option of aiokafka's clients"),
        ("[1, 2]", "is not a JSON object but list"),
        ("{oops", "is not a JSON object"),
        ('{"retry_backoff_ms": [1]}', "'retry_backoff_ms' is list, not a string, number or"),
    ],
)
def test_kafka_options_refused_are_named(
    monkeypatch: pytest.MonkeyPatch, options: str, named: str
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_KAFKA_OPTIONS", options)
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "kafka_options" in str(error.value)
    assert named in str(error.value)


def test_the_linger_ms_refusal_suggests_no_option_it_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_KAFKA_OPTIONS", '{"linger": 5}')
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "did you mean linger_ms" not in str(error.value)


def test_the_openai_judge_needs_an_endpoint_and_a_model_and_hides_its_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE", "openai")
    with pytest.raises(SettingsError, match="judge openai needs judge_base_url and judge_model"):
        load_settings()
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_MODEL", "m")
    for url in ("ftp://x", "http://user:pw@h/v1", "http://h/v1?x=1", "h:8000"):
        monkeypatch.setenv("CITATION_EXPORTER_JUDGE_BASE_URL", url)
        with pytest.raises(SettingsError, match=r"judge_base_url .*must be an http"):
            load_settings()
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_BASE_URL", "http://127.0.0.1:8000/v1/")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_API_KEY", "sk-secret-123")
    settings = load_settings()
    assert settings.judge_base_url == "http://127.0.0.1:8000/v1"
    assert settings.judge_api_key is not None
    assert "sk-secret-123" not in repr(settings) + str(settings)


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("CITATION_EXPORTER_JUDGE_API_KEY", "sk-clé", "API key must be printable ASCII"),
        ("CITATION_EXPORTER_JUDGE_API_KEY", "sk-1\n", "API key must be printable ASCII"),
        ("CITATION_EXPORTER_JUDGE_BASE_URL", "http://[::1/v1", "base_url is not a URL"),
        ("CITATION_EXPORTER_JUDGE_BASE_URL", "http://127.0.0.1:99999/v1", "not 1 to 65535"),
    ],
)
def test_a_model_judge_that_cannot_be_made_is_named_at_start_up(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    """The service made its model judge once connected to Kafka: a judge the settings could
    not make stopped it there with a traceback, not at start-up with exit 2."""
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE", "openai")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_MODEL", "m")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=named) as error:
        load_settings()
    assert "sk-" not in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"chunk_lookup": "postgresql://u:pw@db/kb"}, "set chunks_layout to langchain"),
        (
            {"chunk_lookup": "postgresql://u:pw@db/kb", "chunks_layout": "langchain-v2"},
            "langchain-v2 needs chunks_table",
        ),
        (
            {
                "chunk_lookup": "postgresql://u:pw@db/kb",
                "chunks_layout": "llamaindex",
                "chunks_collection": "docs",
            },
            "chunks_collection is for chunks_layout langchain",
        ),
        ({"chunk_lookup": "/srv/chunks.jsonl"}, "expected a Postgres connection URI"),
        ({"chunks_table": "data_kb"}, "chunks_table is for lookup mode: set chunk_lookup too"),
        ({"chunk_lookup_ttl_seconds": -1}, "chunk_lookup_ttl_seconds"),
    ],
)
def test_a_lookup_that_cannot_work_is_named_at_start_up(
    values: dict[str, object], named: str
) -> None:
    with pytest.raises(SettingsError, match=named) as error:
        load_settings(**values)
    assert "u:pw" not in str(error.value)  # the password is in no message


def test_a_lookup_takes_the_layout_settings_the_debezium_events_take() -> None:
    settings = load_settings(
        chunk_lookup="postgresql://u:pw@db/kb",
        chunks_layout="llamaindex",
        chunks_table="data_kb",
        chunks_doc_id_key="doc",
    )
    layout = settings.chunk_layout
    assert (layout.name, layout.table, layout.doc_id_key) == ("llamaindex", "data_kb", "doc")
    assert "pw" not in repr(settings)
    query = load_settings(
        chunk_lookup="postgresql://db/kb", chunks_query="SELECT * FROM kb"
    ).chunk_layout
    assert (query.name, query.query) == ("query", "SELECT * FROM kb")
