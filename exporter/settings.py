"""Settings of the streaming exporter, from environment variables or a TOML file.

Every setting has an environment variable ``CITATION_EXPORTER_<NAME>`` (for example
``CITATION_EXPORTER_BOOTSTRAP_SERVERS``); a TOML file named by ``CITATION_EXPORTER_CONFIG_FILE``
(or ``citation-exporter run --config FILE``) may set the same names in lower case. Environment
variables win over the file. Nothing is read at import.

Settings are strict: an invalid value, an unknown key in the file, and an unknown
``CITATION_EXPORTER_*`` variable each stop start-up with a message naming them (with a "did you
mean" for a likely misspelling: a misspelt threshold silently ignored is a monitor that judges
by the wrong rules). The variables Kubernetes injects for a Service named ``citation-exporter``
(``CITATION_EXPORTER_SERVICE_HOST``, ``CITATION_EXPORTER_PORT_9877_TCP`` ...) are recognised and
ignored. TLS files and the OAUTHBEARER token file are read at start-up, so an unreadable CA is
named there rather than retried forever as an unreachable broker.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from exporter.checks.claims import DEFAULT_CLASSIFIER, SentenceClassifier, load_classifier
from exporter.checks.engine import Policy
from exporter.checks.lookup_cache import DEFAULT_CACHE_BYTES, DEFAULT_TTL_SECONDS
from exporter.config.kafka import (
    OWN_KAFKA_OPTIONS,
    KafkaConnection,
    KafkaOptionValue,
    KafkaTopics,
    aiokafka_options,
    json_object,
    kafka_option_problem,
    read_token,
    tls_context,
)
from exporter.config.postgres import ChunkLayout, is_postgres_uri
from exporter.config.sweep_judging import SweepJudging
from exporter.config.web import Exposure, load_web_config
from exporter.defaults import (
    DEFAULT_HIGH_SEVERITY_TOPICS,
    DEFAULT_JUDGE_SWEEP_SAMPLE,
    DEFAULT_METRICS_PORT,
    DEFAULT_THRESHOLD,
    ENV_PREFIX,
    comma_separated,
    ratio_value,
    similarity_threshold,
)
from exporter.errors import SettingsError
from exporter.records.change_events import ChangeColumns
from exporter.records.limits import DEFAULT_LIMITS, MAX_SENTENCES_PER_ANSWER, Limits
from exporter.small_files import (
    UnusableFile,
    described,
    load_toml,
    read_small_file,
    shown,
)

if TYPE_CHECKING:
    from exporter.config.judge import OpenAIJudgeConfig

__all__ = [
    "ENV_PREFIX",
    "MAX_CONFIG_FILE_BYTES",
    "JudgeSettings",
    "Settings",
    "SettingsError",
    "load_judge_settings",
    "load_settings",
]

CONFIG_FILE_VARIABLE = f"{ENV_PREFIX}CONFIG_FILE"
# Service links Kubernetes injects into every pod of a namespace for a Service named
# "citation-exporter": not ours, never an error.
_KUBERNETES_SERVICE_LINK = re.compile(
    rf"{ENV_PREFIX}(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)"
)


_SASL_MECHANISMS_WITH_PASSWORD = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# what Kafka takes as a topic's name (org.apache.kafka.common.internals.Topic)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_MAX_REPLICATION_FACTOR = 32
# The largest sample a sweep may judge: a model judging 10,000 takes about 5 minutes at
# concurrency 4 and $4, more than a sample needs (400 a stratum; the summary projects the whole
# archive), and the sample's memory grows with it: 280 MB at the default 2,000 for an archive
# crafted to fill every stratum with 2,000-character claims, so about 1.4 GB at this bound.
MAX_SWEEP_SAMPLE = 10_000
# The settings' TOML file: a few dozen lines.
MAX_CONFIG_FILE_BYTES = 1024 * 1024
# An error message lists this many problems; the rest are counted.
_MAX_PROBLEMS = 5


class JudgeSettings(BaseSettings):
    """How citations are judged for entailment: the judge, its endpoint, what it may cost,
    and how much of the traffic and of a sweep it reads (see exporter.entailment.results).

    The service's settings include these; ``citation-exporter sweep`` reads them alone, from
    the same environment variables (:func:`load_judge_settings`).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    judge: Literal["lexical", "openai"] = "lexical"
    judge_base_url: str | None = None
    judge_model: str | None = Field(None, max_length=200)  # sent in every request
    judge_api_key: SecretStr | None = None
    # a judgement's whole time: below 0.1 s no model answers, and every call would time out
    judge_timeout_seconds: float = Field(30.0, ge=0.1, le=600.0)
    judge_concurrency: int = Field(4, ge=1, le=256)
    # dollars per 1,000 tokens: the dearest models cost cents; 1,000 is a mistake, not a price
    judge_price_input_per_1k: float = Field(0.0, ge=0.0, le=1_000.0, allow_inf_nan=False)
    judge_price_output_per_1k: float = Field(0.0, ge=0.0, le=1_000.0, allow_inf_nan=False)
    judge_max_retries: int = Field(3, ge=0, le=10)
    judge_max_tokens: int = Field(16, ge=1, le=4096)
    # behind the response: the share of live citations judged, and what that may cost
    # a ratio: 0.01 or "1%" (a bare 1 or more is refused, see exporter.defaults.ratio_value)
    judge_sample_rate: float = Field(0.01, ge=0.0, le=1.0)
    judge_queue_size: int = Field(1_000, ge=1, le=1_000_000)
    judge_budget_usd_per_hour: float | None = Field(None, ge=0.0, allow_inf_nan=False)
    # in a sweep: the stratified sample judged, and what one sweep may spend on it; the
    # sample keeps at most 2 x this many candidates per stratum in memory (25 strata)
    judge_sweep_sample: int = Field(DEFAULT_JUDGE_SWEEP_SAMPLE, ge=0, le=MAX_SWEEP_SAMPLE)
    judge_sweep_budget_usd: float | None = Field(None, ge=0.0, allow_inf_nan=False)

    @field_validator("judge_base_url", "judge_model", "judge_api_key", mode="before")
    @classmethod
    def _empty_judge_value_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("judge_sample_rate", mode="before")
    @classmethod
    def _a_ratio(cls, value: object) -> object:
        """``0.01`` and ``1%`` alike, from a variable or a file; a bare 1 or more is refused."""
        if isinstance(value, (str, int, float)):  # a bool too: true is no ratio (it was 100%)
            return ratio_value(value)
        return value

    @field_validator("judge_base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        """The judge's endpoint: http(s)://host[:port][/path], without credentials in it."""
        if value is None:
            return None
        url = value.strip().rstrip("/")
        if not re.fullmatch(r"https?://[^\s/?#@]+(?:/[^\s?#]*)?", url):
            raise ValueError(
                "must be an http:// or https:// URL like http://127.0.0.1:8000/v1, without "
                f"user info, query or fragment; got {shown(value, 80)}"
            )
        return url

    @property
    def model_judge(self) -> OpenAIJudgeConfig | None:
        """The model judge these settings configure (None: the lexical judge alone)."""
        return judge_config(self)

    @property
    def sweep_judging(self) -> SweepJudging:
        """How a sweep judges its sample (the judges take this, never the settings)."""
        return SweepJudging(
            self.judge_sweep_sample, judge_config(self), self.judge_sweep_budget_usd
        )

    @model_validator(mode="after")
    def _judge_is_complete(self) -> JudgeSettings:
        """The openai judge needs an endpoint and a model it can be made with: say so at
        start-up (the service makes its judge only once connected to Kafka)."""
        if self.judge == "openai":
            missing = [
                name for name in ("judge_base_url", "judge_model") if not getattr(self, name)
            ]
            if missing:
                raise ValueError(f"judge openai needs {' and '.join(missing)}")
            try:
                judge_config(self)
            except SettingsError as exc:
                raise ValueError(str(exc)) from None
        return self


# ChunkLayout's messages name the sweep's flags; the service's settings are these
_LAYOUT_FLAGS = (
    ("--chunks-layout", "chunks_layout"),
    ("--chunks-query", "chunks_query"),
    ("--chunks-table", "chunks_table"),
    ("--collection", "chunks_collection"),
    ("--doc-id-key", "chunks_doc_id_key"),
    ("--doc-version-key", "chunks_doc_version_key"),
    ("--offset-key", "chunks_offset_key"),
    ("--chunker-key", "chunks_chunker_key"),
)


class Settings(JudgeSettings):
    """What the exporter connects to, what it reads and writes, and how it judges."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # Kafka
    bootstrap_servers: str = Field("127.0.0.1:9092", min_length=1)
    group_id: str = Field("citation-drift-exporter", min_length=1)
    # each client adds its role: citation-exporter-answers, -chunks, -control, -producer, ...
    client_id: str = Field("citation-exporter", min_length=1)
    chunks_topic: str = Field("rag.chunks", min_length=1)
    answers_topic: str = Field("rag.answers", min_length=1)
    verdicts_topic: str = Field("rag.citation-verdicts", min_length=1)
    dlq_topic: str = Field("rag.citation-events.dlq", min_length=1)
    control_topic: str = Field("rag.control", min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"] | None
    ) = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_oauth_token_file: Path | None = None
    sasl_kerberos_service_name: str = Field("kafka", min_length=1)
    sasl_kerberos_domain_name: str | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    publish_all_verdicts: bool = False
    # further aiokafka client options, e.g. {"session_timeout_ms": 45000}
    kafka_options: Annotated[dict[str, KafkaOptionValue], NoDecode] = Field(default_factory=dict)

    # bounds on what one input may cost (see exporter.records.limits)
    max_message_bytes: int = Field(DEFAULT_LIMITS.max_message_bytes, gt=0)
    max_chunk_chars: int = Field(DEFAULT_LIMITS.max_chunk_chars, gt=0)
    max_doc_offset: int = Field(DEFAULT_LIMITS.max_doc_offset, gt=0)
    max_citations_per_answer: int = Field(DEFAULT_LIMITS.max_citations_per_answer, gt=0)
    max_sentences_per_answer: int = Field(
        DEFAULT_LIMITS.max_sentences_per_answer, gt=0, le=MAX_SENTENCES_PER_ANSWER
    )
    max_quote_chars: int = Field(DEFAULT_LIMITS.max_quote_chars, gt=0)
    relocation_budget_ms: float = Field(DEFAULT_LIMITS.relocation_budget_ms, gt=0.0)

    # checks
    threshold: float = DEFAULT_THRESHOLD
    high_severity_topics: Annotated[frozenset[str], NoDecode] = DEFAULT_HIGH_SEVERITY_TOPICS
    sources: Annotated[frozenset[str], NoDecode] = frozenset()
    max_sources: int = Field(20, ge=0)
    # coverage: judged where answers carry sentences, unless off; "hybrid" (the built-in
    # rules and model), "rules" (the rules alone) or "module:attribute" of another one
    coverage: bool = True
    coverage_classifier: str = Field(DEFAULT_CLASSIFIER, min_length=1)
    topics: Annotated[frozenset[str], NoDecode] = frozenset()
    max_topics: int = Field(20, ge=0)

    # Debezium change events on the chunk topic: the chunks table's layout ("auto" tells
    # LangChain's, PGVectorStore's, LlamaIndex's and the record's own columns apart) and the
    # metadata keys of a chunk's fields (unset: the layout's defaults; docs/postgres.md)
    chunks_layout: Literal["auto", "record", "langchain", "langchain-v2", "llamaindex"] = "auto"
    chunks_doc_id_key: str | None = Field(None, min_length=1, max_length=200)
    chunks_doc_version_key: str = Field("doc_version", min_length=1, max_length=200)
    chunks_offset_key: str | None = Field(None, min_length=1, max_length=200)
    chunks_chunker_key: str = Field("chunker", min_length=1, max_length=200)

    # lookup mode: look up, before each batch, the chunks it cites in this Postgres database
    # (a libpq URI) instead of mirroring the chunk topic; the rows are chunks_layout's
    # (langchain, langchain-v2, llamaindex) or chunks_query's (docs/postgres.md)
    chunk_lookup: SecretStr | None = None
    chunks_collection: str | None = Field(None, min_length=1, max_length=200)
    chunks_table: str | None = Field(None, min_length=1, max_length=200)
    chunks_query: str | None = Field(None, min_length=1, max_length=100_000)
    # what the documents held for recent batches may cost, and how long one is fresh
    chunk_lookup_cache_bytes: int = Field(DEFAULT_CACHE_BYTES, gt=0)
    chunk_lookup_ttl_seconds: float = Field(DEFAULT_TTL_SECONDS, ge=0.0)

    # sweeps
    sweep_quiet_seconds: float = Field(60.0, gt=0.0)
    # the instances of the group share each sweep (each sweeps the answer partitions it owns),
    # through a compacted topic of one partition, created at start-up when missing; off, each
    # instance sweeps everything alone
    share_sweeps: bool = True
    sweeps_topic: str | None = None  # unset: "<group_id>.sweeps"
    # the replicas of a sweeps topic the exporter creates (unset: 3, or fewer brokers)
    sweeps_topic_replication_factor: int | None = Field(None, ge=1, le=_MAX_REPLICATION_FACTOR)
    # a shared sweep's control requests older than this when first read are not carried out
    # (every instance reads the control topic from its start)
    sweep_request_max_age_seconds: float = Field(86_400.0, gt=0.0)

    # metrics endpoint
    metrics_host: str = "0.0.0.0"  # an exporter is scraped from other hosts
    metrics_port: int = Field(DEFAULT_METRICS_PORT, ge=0, le=65535)
    web_config_file: Path | None = None  # TLS and basic auth, see exporter.config.web

    @field_validator("threshold")
    @classmethod
    def _on_the_percent_scale(cls, value: float) -> float:
        return similarity_threshold(value)

    @field_validator(
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        "web_config_file",
        "sasl_oauth_token_file",
        "sasl_kerberos_domain_name",
        "sweeps_topic",
        "sweeps_topic_replication_factor",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """``CITATION_EXPORTER_SSL_CAFILE=`` means no file, not the current directory."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("web_config_file")
    @classmethod
    def _web_config_is_usable(cls, value: Path | None) -> Path | None:
        """Its certificates and hashes are checked at start-up, not at the first scrape."""
        if value is not None:
            load_web_config(value)
        return value

    @field_validator("coverage_classifier")
    @classmethod
    def _classifier_loads(cls, value: str) -> str:
        """A classifier that cannot be imported is a start-up error, not a crash mid-stream."""
        try:
            _classifier(value)
        except SettingsError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("high_severity_topics", "sources", "topics", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        """Accept ``a,b,c`` from an environment variable as well as a list."""
        return comma_separated(value) if isinstance(value, str) else value

    @field_validator("kafka_options", mode="before")
    @classmethod
    def _table_of_scalars(cls, value: object) -> object:
        """A JSON object from the environment variable (a TOML table arrives as a dict), whose
        values are what a client option can be: a string, a number or a boolean."""
        if isinstance(value, str):
            value = json_object(value)
        if isinstance(value, dict):
            problems = []
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.append(f"the key {described(key)} is not a string")
                elif not isinstance(item, KafkaOptionValue):
                    problems.append(
                        f"'{shown(key)}' is {type(item).__name__}, not a string, number or boolean"
                    )
            if problems:
                raise ValueError(_listed(problems))
        return value

    @field_validator("kafka_options")
    @classmethod
    def _options_aiokafka_takes(
        cls, value: dict[str, KafkaOptionValue]
    ) -> dict[str, KafkaOptionValue]:
        """Only options some aiokafka client takes, none the exporter sets itself, each of the
        type and range aiokafka expects."""
        if not value:
            return value
        accepted = aiokafka_options()
        problems = []
        for key, item in value.items():
            if key in OWN_KAFKA_OPTIONS:
                problems.append(f"'{key}' is set by the exporter ({OWN_KAFKA_OPTIONS[key]})")
            elif key not in accepted:
                problems.append(
                    f"'{shown(key)}' is no option of aiokafka's clients"
                    f"{_did_you_mean(key[:100], sorted(set(accepted) - set(OWN_KAFKA_OPTIONS)))}"
                )
            else:
                problem = kafka_option_problem(key, item, accepted[key])
                if problem is not None:
                    problems.append(f"'{key}' {problem}")
        if problems:
            raise ValueError(_listed(problems))
        return value

    @model_validator(mode="after")
    def _security_is_complete(self) -> Settings:
        """SASL needs what its mechanism logs in with, and TLS files must be readable: say so at
        start-up rather than as a broker that cannot be reached."""
        if self.security_protocol.startswith("SASL"):
            self._sasl_is_complete()
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("ssl_keyfile is set but ssl_certfile is not")
        if self.security_protocol in ("SSL", "SASL_SSL"):
            tls_context(self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile)
        return self

    def _sasl_is_complete(self) -> None:
        mechanism = self.sasl_mechanism or "PLAIN"
        if mechanism in _SASL_MECHANISMS_WITH_PASSWORD and not (
            self.sasl_username and self.sasl_password
        ):
            raise ValueError(
                f"security_protocol {self.security_protocol} with sasl_mechanism {mechanism} "
                "needs sasl_username and sasl_password"
            )
        if mechanism == "OAUTHBEARER":
            if self.sasl_oauth_token_file is None:
                raise ValueError("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_file")
            read_token(self.sasl_oauth_token_file)
        if mechanism == "GSSAPI":
            try:
                importlib.import_module("gssapi")  # what aiokafka imports for GSSAPI
            except ImportError:
                raise ValueError(
                    "sasl_mechanism GSSAPI needs the gssapi package and the system's Kerberos "
                    "library: pip install 'citation-drift-exporter[gssapi]'"
                ) from None

    @model_validator(mode="after")
    def _sweeps_topic_is_a_topic_name(self) -> Settings:
        """The sweeps topic named after the group must be a name Kafka takes: say so here, not
        as a broker's InvalidTopicException at the first sweep."""
        topic = self.shared_sweeps_topic
        if topic is not None and not _TOPIC_NAME.fullmatch(topic):
            source = "sweeps_topic" if self.sweeps_topic else f"group_id {shown(self.group_id)!r}"
            raise ValueError(
                f"sweeps topic {shown(topic)!r} (from {source}) is no Kafka topic name: at most "
                "249 of the letters, digits, '.', '_' and '-'; set sweeps_topic to one"
            )
        return self

    @model_validator(mode="after")
    def _lookup_is_complete(self) -> Settings:
        """Lookup mode needs a database and a layout it can read; say so at start-up."""
        if self.chunk_lookup is None:
            for name in ("chunks_collection", "chunks_table", "chunks_query"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is for lookup mode: set chunk_lookup too")
            return self
        if not is_postgres_uri(self.chunk_lookup.get_secret_value()):
            raise ValueError("chunk_lookup: expected a Postgres connection URI (postgresql://...)")
        try:
            self.chunk_layout  # noqa: B018 - built to be checked
        except SettingsError as exc:
            raise ValueError(str(exc)) from None
        if importlib.util.find_spec("psycopg") is None:
            raise ValueError(
                "chunk_lookup needs psycopg: pip install 'citation-drift-exporter[postgres]'"
            )
        return self

    @property
    def chunk_layout(self) -> ChunkLayout:
        """Lookup mode's layout of the chunks table (chunks_layout, or chunks_query)."""
        if self.chunks_query is not None:
            name = "query"
        elif self.chunks_layout in ("auto", "record"):
            raise SettingsError(
                f"chunk_lookup with chunks_layout {self.chunks_layout}: set chunks_layout to "
                "langchain, langchain-v2 or llamaindex, or chunks_query to a query of your own"
            )
        else:
            name = self.chunks_layout
        # a query names its own columns: the metadata keys are a library layout's
        keys = (
            {}
            if name == "query"
            else {
                "doc_id_key": self.chunks_doc_id_key,
                "doc_version_key": self.chunks_doc_version_key,
                "offset_key": self.chunks_offset_key,
                "chunker_key": self.chunks_chunker_key,
            }
        )
        try:
            return ChunkLayout.of(
                name,
                collection=self.chunks_collection,
                table=self.chunks_table,
                query=self.chunks_query,
                **keys,
            )
        except SettingsError as exc:  # named as the settings are, not as the flags
            message = str(exc)
            for flag, setting in _LAYOUT_FLAGS:
                message = message.replace(flag, setting)
            raise SettingsError(message) from None

    @property
    def shared_sweeps_topic(self) -> str | None:
        """The topic through which the group shares its sweeps (None: each sweeps alone)."""
        if not self.share_sweeps:
            return None
        return self.sweeps_topic or f"{self.group_id}.sweeps"

    @property
    def limits(self) -> Limits:
        return Limits(
            max_message_bytes=self.max_message_bytes,
            max_chunk_chars=self.max_chunk_chars,
            max_doc_offset=self.max_doc_offset,
            max_citations_per_answer=self.max_citations_per_answer,
            max_sentences_per_answer=self.max_sentences_per_answer,
            max_quote_chars=self.max_quote_chars,
            relocation_budget_ms=self.relocation_budget_ms,
        )

    @property
    def kafka(self) -> KafkaConnection:
        """How the Kafka clients connect (the Kafka adapter's clients read no settings)."""
        return KafkaConnection(
            bootstrap_servers=self.bootstrap_servers,
            client_id=self.client_id,
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=self.sasl_password,
            sasl_oauth_token_file=self.sasl_oauth_token_file,
            sasl_kerberos_service_name=self.sasl_kerberos_service_name,
            sasl_kerberos_domain_name=self.sasl_kerberos_domain_name,
            ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            kafka_options=dict(self.kafka_options),
            max_message_bytes=self.max_message_bytes,
        )

    @property
    def kafka_topics(self) -> KafkaTopics:
        """The topics the exporter reads and writes."""
        return KafkaTopics(
            self.chunks_topic,
            self.answers_topic,
            self.verdicts_topic,
            self.dlq_topic,
            self.control_topic,
        )

    @property
    def exposure(self) -> Exposure:
        """What the metrics endpoint takes (the HTTP adapter reads no settings)."""
        return Exposure(
            self.metrics_host,
            self.metrics_port,
            self.web_config_file,
            self.sources,
            self.max_sources,
            self.topics,
            self.max_topics,
        )

    @property
    def change_columns(self) -> ChangeColumns:
        """How a Debezium change event of the chunks table becomes a chunk record."""
        return ChangeColumns(
            self.chunks_layout,
            self.chunks_doc_id_key,
            self.chunks_doc_version_key,
            self.chunks_offset_key,
            self.chunks_chunker_key,
        )

    @property
    def policy(self) -> Policy:
        """How citations are judged, as the checks take it."""
        return Policy(
            self.threshold,
            self.high_severity_topics,
            self.limits,
            _classifier(self.coverage_classifier),
            self.coverage,
            self.judge_sample_rate,
        )

    # what the TOML file says, read and parsed by load_settings (None: no file)
    file_values: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if cls.file_values is not None:
            # what TomlConfigSettingsSource does with the file it reads itself, unbounded
            sources.append(InitSettingsSource(settings_cls, cls.file_values))
        return tuple(sources)


def _listed(problems: list[str]) -> str:
    """The first few problems; how many more there are."""
    more = len(problems) - _MAX_PROBLEMS
    return "; ".join(problems[:_MAX_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


@functools.lru_cache(maxsize=4)
def _classifier(spec: str) -> SentenceClassifier:
    """The classifier a spec names, loaded once per process: a factory that loads a model is
    not run again for every policy the settings give (nor twice at start-up)."""
    return load_classifier(spec)


def _source(
    name: str,
    overrides: dict[str, object],
    config_file: Path | None,
    flags: Mapping[str, str] | None = None,
) -> str:
    """Where a setting's value came from, as its owner would look for it: the option (named
    in ``flags`` when it is not the setting's name), the variable or the file (in that order
    of precedence, as pydantic-settings reads them)."""
    if name in overrides:
        return (flags or {}).get(name, f"--{name.replace('_', '-')}")
    variable = f"{ENV_PREFIX}{name.upper()}"
    if variable in os.environ or config_file is None:
        return variable
    return f"in {shown(config_file)}"


def _describe(
    error: ValidationError,
    overrides: dict[str, object],
    config_file: Path | None,
    settings_cls: type[BaseSettings] = Settings,
    flags: Mapping[str, str] | None = None,
) -> str:
    problems = []
    names = list(settings_cls.model_fields)
    for item in error.errors():
        name = ".".join(shown(str(part), 60) for part in item["loc"][:4]) or "settings"
        message = shown(item["msg"].removeprefix("Value error, "), 600)
        if item["type"] == "extra_forbidden":
            where = f" in {shown(config_file)}" if config_file is not None else ""
            problems.append(f"unknown setting '{name}'{where}{_did_you_mean(name[:100], names)}")
        elif not item["loc"]:
            problems.append(message)
        else:
            top = str(item["loc"][0])
            source = _source(top, overrides, config_file, flags)
            problems.append(f"{name} ({source}): {message}")
    return "invalid settings: " + _listed(problems)


def _unknown_variables(prefix: str = ENV_PREFIX) -> list[str]:
    """``CITATION_EXPORTER_*`` variables (those starting with ``prefix``) that name no
    setting (pydantic ignores them)."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    known.add(CONFIG_FILE_VARIABLE)
    problems = []
    for variable in sorted(os.environ):
        upper = variable.upper()
        if not upper.startswith(prefix) or upper in known:
            continue
        if _KUBERNETES_SERVICE_LINK.fullmatch(upper):
            continue
        problems.append(
            f"unknown variable {shown(variable)}{_did_you_mean(upper[:100], sorted(known))}"
        )
    return problems


def _file_values(config_file: Path) -> dict[str, Any]:
    """The TOML file's table, read bounded and without blocking; SettingsError naming it."""
    where = f"config file {shown(config_file)}"
    try:
        data = read_small_file(config_file, MAX_CONFIG_FILE_BYTES)
    except UnusableFile as exc:
        raise SettingsError(f"{where} {exc}") from None
    try:
        return load_toml(data)
    except UnusableFile as exc:
        raise SettingsError(f"{where} {exc}") from None


def load_settings(config_file: Path | None = None, **overrides: object) -> Settings:
    """Read the settings; raise SettingsError naming each invalid one."""
    unknown = _unknown_variables()
    if unknown:
        raise SettingsError("invalid settings: " + _listed(unknown))
    if config_file is None and os.environ.get(CONFIG_FILE_VARIABLE):
        config_file = Path(os.environ[CONFIG_FILE_VARIABLE])
    settings_cls = Settings
    if config_file is not None:
        values = _file_values(config_file)

        class FromFile(Settings):
            file_values = values

        settings_cls = FromFile
    try:
        return settings_cls(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(_describe(exc, overrides, config_file)) from None
    except RecursionError:  # a value nested thousands deep, where pydantic walks it
        raise SettingsError("invalid settings: a value is nested too deeply") from None
    except OSError as exc:  # a file some validator reads: each names its own problems first
        raise SettingsError(f"invalid settings: {shown(exc, 300)}") from None


def load_judge_settings(
    overrides: dict[str, object], flags: Mapping[str, str] | None = None
) -> JudgeSettings:
    """The judge's settings alone, from the environment and ``overrides`` (a command's flags,
    by setting name; ``flags`` names the flag of a setting where it differs); raise
    SettingsError naming each invalid one. Variables of the service's other settings are not
    read; a misspelt ``CITATION_EXPORTER_JUDGE_*`` one is an error."""
    unknown = _unknown_variables(f"{ENV_PREFIX}JUDGE")
    if unknown:
        raise SettingsError("invalid settings: " + _listed(unknown))
    try:
        return JudgeSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(_describe(exc, overrides, None, JudgeSettings, flags)) from None


def judge_config(settings: JudgeSettings) -> OpenAIJudgeConfig | None:
    """The model judge the settings configure; None when they name the lexical judge."""
    from exporter.config.judge import OpenAIJudgeConfig  # noqa: PLC0415 - httpx, when asked

    if settings.judge != "openai":
        return None
    if settings.judge_base_url is None or settings.judge_model is None:
        raise SettingsError("judge openai needs judge_base_url and judge_model")
    key = settings.judge_api_key
    return OpenAIJudgeConfig(
        base_url=settings.judge_base_url,
        model=settings.judge_model,
        api_key=None if key is None else key.get_secret_value(),
        timeout_seconds=settings.judge_timeout_seconds,
        concurrency=settings.judge_concurrency,
        price_input_per_1k=settings.judge_price_input_per_1k,
        price_output_per_1k=settings.judge_price_output_per_1k,
        max_retries=settings.judge_max_retries,
        max_tokens=settings.judge_max_tokens,
    )
