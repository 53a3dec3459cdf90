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
import importlib
import inspect
import json
import math
import os
import re
import ssl
import tomllib
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from exporter.checks.engine import Policy
from exporter.defaults import (
    DEFAULT_HIGH_SEVERITY_TOPICS,
    DEFAULT_METRICS_PORT,
    DEFAULT_THRESHOLD,
    comma_separated,
    similarity_threshold,
)
from exporter.errors import SettingsError
from exporter.records.limits import DEFAULT_LIMITS, Limits
from exporter.web.config import load_web_config
from exporter.web.files import (
    UnusableFile,
    described,
    read_small_file,
    shown,
    small_file_problem,
)
from exporter.web.tls import MAX_TLS_FILE_BYTES, EncryptedKey, refuse_passphrase

__all__ = [
    "ENV_PREFIX",
    "MAX_CONFIG_FILE_BYTES",
    "MAX_TOKEN_BYTES",
    "OWN_KAFKA_OPTIONS",
    "Settings",
    "SettingsError",
    "load_settings",
    "read_token",
    "tls_context",
]

ENV_PREFIX = "CITATION_EXPORTER_"
CONFIG_FILE_VARIABLE = f"{ENV_PREFIX}CONFIG_FILE"
# Service links Kubernetes injects into every pod of a namespace for a Service named
# "citation-exporter": not ours, never an error.
_KUBERNETES_SERVICE_LINK = re.compile(
    rf"{ENV_PREFIX}(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)"
)


# Client options the exporter sets itself, refused in kafka_options, with what to use instead:
# a second value for one of these would either clash with ours or quietly break a guarantee
# (offsets committed after delivery, the store read from the start, acks=all).
OWN_KAFKA_OPTIONS: dict[str, str] = {
    "bootstrap_servers": "use the bootstrap_servers setting",
    "client_id": "use the client_id setting",
    "group_id": "use the group_id setting",
    "security_protocol": "use the security_protocol setting",
    "ssl_context": "use ssl_cafile, ssl_certfile and ssl_keyfile",
    "sasl_mechanism": "use the sasl_mechanism setting",
    "sasl_plain_username": "use the sasl_username setting",
    "sasl_plain_password": "use the sasl_password setting",
    "sasl_kerberos_service_name": "use the sasl_kerberos_service_name setting",
    "sasl_kerberos_domain_name": "use the sasl_kerberos_domain_name setting",
    "sasl_oauth_token_provider": "use the sasl_oauth_token_file setting",
    "max_partition_fetch_bytes": "derived from the max_message_bytes setting",
    "max_request_size": "derived from the max_message_bytes setting",
    "enable_auto_commit": "offsets are committed only once a batch's outputs are delivered",
    "auto_offset_reset": "the chunk store and sweeps read from the earliest offset",
    "acks": "verdicts and dead letters are sent with acks=all",
    "linger_ms": "set by the exporter",
    "max_batch_size": "set by the exporter",
    "request_timeout_ms": "set by the exporter",
    # objects and callables no setting can express, and transactions the exporter does not use
    "topics": "set by the exporter",
    "loop": "set by the exporter",
    "key_deserializer": "the exporter reads bytes",
    "value_deserializer": "the exporter reads bytes",
    "key_serializer": "the exporter writes bytes",
    "value_serializer": "the exporter writes bytes",
    "partitioner": "not expressible as a setting",
    "partition_assignment_strategy": "not expressible as a setting",
    "transactional_id": "the exporter does not use transactions",
}
_SASL_MECHANISMS_WITH_PASSWORD = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_KafkaOptionValue = bool | int | float | str
# What a kafka_options value may be beyond its type: aiokafka takes a wrong type or a 10**30 in
# its constructor and fails later, inside a fetch or a heartbeat, far from the setting.
_KAFKA_INT_MAX = 2**31 - 1  # the protocol's int32: every *_ms, *_bytes and count option
_KAFKA_STRING_CHARS = 1024
# options whose default (None) does not tell their type
_KAFKA_OPTION_TYPES: dict[str, type] = {
    "group_instance_id": str,
    "rebalance_timeout_ms": int,
    "max_poll_records": int,
    "api_version": str,
    "compression_type": str,
    "client_rack": str,
}
_KAFKA_OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "compression_type": ("gzip", "snappy", "lz4", "zstd"),
    "isolation_level": ("read_uncommitted", "read_committed"),
}
_KAFKA_OPTION_MINIMUM: dict[str, int] = {"max_poll_records": 1}
# The settings' TOML file: a few dozen lines.
MAX_CONFIG_FILE_BYTES = 1024 * 1024
# An OAUTHBEARER token: a JWT of a few kilobytes.
MAX_TOKEN_BYTES = 64 * 1024
# RFC 6750's b64token; a token with a control character (\x01 separates OAUTHBEARER's SASL
# fields) would rewrite the login message
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# An error message lists this many problems; the rest are counted.
_MAX_PROBLEMS = 5


class Settings(BaseSettings):
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
    kafka_options: Annotated[dict[str, _KafkaOptionValue], NoDecode] = Field(default_factory=dict)

    # bounds on what one input may cost (see exporter.records.limits)
    max_message_bytes: int = Field(DEFAULT_LIMITS.max_message_bytes, gt=0)
    max_chunk_chars: int = Field(DEFAULT_LIMITS.max_chunk_chars, gt=0)
    max_doc_offset: int = Field(DEFAULT_LIMITS.max_doc_offset, gt=0)
    max_citations_per_answer: int = Field(DEFAULT_LIMITS.max_citations_per_answer, gt=0)
    max_quote_chars: int = Field(DEFAULT_LIMITS.max_quote_chars, gt=0)
    relocation_budget_ms: float = Field(DEFAULT_LIMITS.relocation_budget_ms, gt=0.0)

    # checks
    threshold: float = DEFAULT_THRESHOLD
    high_severity_topics: Annotated[frozenset[str], NoDecode] = DEFAULT_HIGH_SEVERITY_TOPICS
    sources: Annotated[frozenset[str], NoDecode] = frozenset()
    max_sources: int = Field(20, ge=0)

    # sweeps
    sweep_quiet_seconds: float = Field(60.0, gt=0.0)

    # metrics endpoint
    metrics_host: str = "0.0.0.0"  # an exporter is scraped from other hosts
    metrics_port: int = Field(DEFAULT_METRICS_PORT, ge=0, le=65535)
    web_config_file: Path | None = None  # TLS and basic auth, see exporter.web.config

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

    @field_validator("high_severity_topics", "sources", mode="before")
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
            value = _json_object(value)
        if isinstance(value, dict):
            problems = []
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.append(f"the key {described(key)} is not a string")
                elif not isinstance(item, _KafkaOptionValue):
                    problems.append(
                        f"'{shown(key)}' is {type(item).__name__}, not a string, number or boolean"
                    )
            if problems:
                raise ValueError(_listed(problems))
        return value

    @field_validator("kafka_options")
    @classmethod
    def _options_aiokafka_takes(
        cls, value: dict[str, _KafkaOptionValue]
    ) -> dict[str, _KafkaOptionValue]:
        """Only options some aiokafka client takes, none the exporter sets itself, each of the
        type and range aiokafka expects."""
        if not value:
            return value
        accepted = _aiokafka_options()
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
                problem = _kafka_option_problem(key, item, accepted[key])
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
            tls_context(self)
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

    @property
    def limits(self) -> Limits:
        return Limits(
            max_message_bytes=self.max_message_bytes,
            max_chunk_chars=self.max_chunk_chars,
            max_doc_offset=self.max_doc_offset,
            max_citations_per_answer=self.max_citations_per_answer,
            max_quote_chars=self.max_quote_chars,
            relocation_budget_ms=self.relocation_budget_ms,
        )

    @property
    def policy(self) -> Policy:
        """How citations are judged, as the checks take it."""
        return Policy(self.threshold, self.high_severity_topics, self.limits)

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


def read_token(path: Path) -> str:
    """The OAUTHBEARER token in ``path``, or a ValueError naming the file.

    Read without blocking (a FIFO is refused, not waited on: the token provider runs on the
    event loop) and at most MAX_TOKEN_BYTES of it.
    """
    where = f"sasl_oauth_token_file {shown(path)}"
    try:
        data = read_small_file(path, MAX_TOKEN_BYTES)
    except UnusableFile as exc:
        raise ValueError(f"{where} {exc}") from None
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{where} holds bytes a bearer token cannot have") from None
    if not token:
        raise ValueError(f"{where} is empty")
    if not _BEARER_TOKEN.fullmatch(token):
        raise ValueError(f"{where} holds characters a bearer token cannot have")
    return token


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object of an environment variable; ValueError saying what it is instead."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not a JSON object: {shown(exc, 200)}") from None
    except RecursionError:
        raise ValueError("is not a JSON object: nested too deeply") from None
    except ValueError as exc:  # an integer of 5,000 digits
        raise ValueError(f"is not a JSON object: {shown(exc, 200)}") from None
    if not isinstance(value, dict):
        raise ValueError(f"is not a JSON object but {type(value).__name__}")
    return value


def _kafka_option_problem(key: str, value: _KafkaOptionValue, default: object) -> str | None:
    """What is wrong with ``value`` for aiokafka's option ``key`` (default ``default``)."""
    expected = _KAFKA_OPTION_TYPES.get(key) or (
        type(default) if isinstance(default, bool | int | str) else None
    )
    if expected is bool and not isinstance(value, bool):
        return f"must be true or false, not {described(value)}"
    if expected is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, not {described(value)}"
        minimum = _KAFKA_OPTION_MINIMUM.get(key, 0)
        if not minimum <= value <= _KAFKA_INT_MAX:
            return f"must be from {minimum} to {_KAFKA_INT_MAX}, not {described(value)}"
    if expected is str and not isinstance(value, str):
        return f"must be a string, not {described(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {described(value)}"
    if isinstance(value, str):
        if len(value) > _KAFKA_STRING_CHARS:
            return f"is longer than {_KAFKA_STRING_CHARS} characters"
        choices = _KAFKA_OPTION_CHOICES.get(key)
        if choices is not None and value not in choices:
            return f"must be one of {', '.join(choices)}, not {described(value)}"
    return None


def _listed(problems: list[str]) -> str:
    """The first few problems; how many more there are."""
    more = len(problems) - _MAX_PROBLEMS
    return "; ".join(problems[:_MAX_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")


def _aiokafka_options() -> dict[str, object]:
    """Keyword arguments of aiokafka's consumer and producer, with their defaults (imported
    only when needed: the sweep never imports aiokafka)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    return {
        name: parameter.default
        for client in (AIOKafkaConsumer, AIOKafkaProducer)
        for name, parameter in inspect.signature(client).parameters.items()
    }


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context of every Kafka client; a file that cannot be used is named."""
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = getattr(settings, name)
        if path is None:
            continue
        problem = small_file_problem(path, MAX_TLS_FILE_BYTES)
        if problem is not None:
            raise ValueError(f"{name} {shown(path)} {problem}")
    try:
        context = ssl.create_default_context(
            cafile=str(settings.ssl_cafile) if settings.ssl_cafile else None
        )
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"ssl_cafile {shown(settings.ssl_cafile or '')} holds no usable CA certificate: "
            f"{shown(exc, 200)}"
        ) from None
    if settings.ssl_certfile:
        try:
            context.load_cert_chain(
                str(settings.ssl_certfile),
                str(settings.ssl_keyfile) if settings.ssl_keyfile else None,
                password=refuse_passphrase,
            )
        except EncryptedKey:
            raise ValueError(
                f"ssl_keyfile {shown(settings.ssl_keyfile or settings.ssl_certfile)} is "
                "encrypted: the exporter needs a key without a passphrase"
            ) from None
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(
                f"ssl_certfile {shown(settings.ssl_certfile)} / ssl_keyfile "
                f"{shown(settings.ssl_keyfile or '')}: not a usable client certificate and "
                f"key: {shown(exc, 200)}"
            ) from None
    return context


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _source(name: str, overrides: dict[str, object], config_file: Path | None) -> str:
    """Where a setting's value came from, as its owner would look for it: the option, the
    variable or the file (in that order of precedence, as pydantic-settings reads them)."""
    if name in overrides:
        return f"--{name.replace('_', '-')}"
    variable = f"{ENV_PREFIX}{name.upper()}"
    if variable in os.environ or config_file is None:
        return variable
    return f"in {shown(config_file)}"


def _describe(
    error: ValidationError, overrides: dict[str, object], config_file: Path | None
) -> str:
    problems = []
    names = list(Settings.model_fields)
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
            problems.append(f"{name} ({_source(top, overrides, config_file)}): {message}")
    return "invalid settings: " + _listed(problems)


def _unknown_variables() -> list[str]:
    """``CITATION_EXPORTER_*`` variables that name no setting (pydantic ignores them)."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    known.add(CONFIG_FILE_VARIABLE)
    problems = []
    for variable in sorted(os.environ):
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
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
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{where} is not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{where} is not valid TOML: {shown(exc, 200)}") from None
    except RecursionError:
        raise SettingsError(f"{where} is not valid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer of 5,000 digits
        raise SettingsError(
            f"{where} holds a value TOML cannot convert: {shown(exc, 200)}"
        ) from None


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
