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
import os
import re
import ssl
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
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

__all__ = [
    "ENV_PREFIX",
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
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"is not a JSON object: {exc}") from None
            if not isinstance(value, dict):
                raise ValueError(f"is not a JSON object but {type(value).__name__}")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(item, _KafkaOptionValue):
                    raise ValueError(
                        f"'{key}' is {type(item).__name__}, not a string, number or boolean"
                    )
        return value

    @field_validator("kafka_options")
    @classmethod
    def _options_aiokafka_takes(
        cls, value: dict[str, _KafkaOptionValue]
    ) -> dict[str, _KafkaOptionValue]:
        """Only options some aiokafka client takes, and none the exporter sets itself."""
        if not value:
            return value
        accepted = _aiokafka_options()
        problems = []
        for key in value:
            if key in OWN_KAFKA_OPTIONS:
                problems.append(f"'{key}' is set by the exporter ({OWN_KAFKA_OPTIONS[key]})")
            elif key not in accepted:
                problems.append(
                    f"'{key}' is no option of aiokafka's clients"
                    f"{_did_you_mean(key, sorted(accepted - set(OWN_KAFKA_OPTIONS)))}"
                )
        if problems:
            raise ValueError("; ".join(problems))
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
        if settings_cls.model_config.get("toml_file"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)


def read_token(path: Path) -> str:
    """The OAUTHBEARER token in ``path``, or a ValueError naming the file."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ValueError(f"sasl_oauth_token_file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"sasl_oauth_token_file {path} cannot be read: {exc}") from None
    if not token:
        raise ValueError(f"sasl_oauth_token_file {path} is empty")
    return token


def _aiokafka_options() -> set[str]:
    """Keyword arguments of aiokafka's consumer and producer (imported only when needed: the
    sweep never imports aiokafka)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    return {
        name
        for client in (AIOKafkaConsumer, AIOKafkaProducer)
        for name in inspect.signature(client).parameters
    }


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context of every Kafka client; a file that cannot be used is named."""
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = getattr(settings, name)
        if path is not None and not os.access(path, os.R_OK):
            why = "does not exist" if not path.exists() else "is not readable"
            raise ValueError(f"{name} {path} {why}")
    try:
        context = ssl.create_default_context(
            cafile=str(settings.ssl_cafile) if settings.ssl_cafile else None
        )
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"ssl_cafile {settings.ssl_cafile} holds no usable CA certificate: {exc}"
        ) from None
    if settings.ssl_certfile:
        try:
            context.load_cert_chain(
                str(settings.ssl_certfile),
                str(settings.ssl_keyfile) if settings.ssl_keyfile else None,
            )
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(
                f"ssl_certfile {settings.ssl_certfile} / ssl_keyfile {settings.ssl_keyfile}: "
                f"not a usable client certificate and key: {exc}"
            ) from None
    return context


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _describe(error: ValidationError) -> str:
    problems = []
    names = list(Settings.model_fields)
    for item in error.errors():
        name = ".".join(str(part) for part in item["loc"]) or "settings"
        variable = f"{ENV_PREFIX}{name.upper()}"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown setting '{name}'{_did_you_mean(name, names)}")
        elif not item["loc"]:
            problems.append(item["msg"].removeprefix("Value error, "))
        else:
            problems.append(f"{name} ({variable}): {item['msg'].removeprefix('Value error, ')}")
    return "invalid settings: " + "; ".join(problems)


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
        problems.append(f"unknown variable {variable}{_did_you_mean(upper, sorted(known))}")
    return problems


def load_settings(config_file: Path | None = None, **overrides: object) -> Settings:
    """Read the settings; raise SettingsError naming each invalid one."""
    unknown = _unknown_variables()
    if unknown:
        raise SettingsError("invalid settings: " + "; ".join(unknown))
    if config_file is None and os.environ.get(CONFIG_FILE_VARIABLE):
        config_file = Path(os.environ[CONFIG_FILE_VARIABLE])
    settings_cls = Settings
    if config_file is not None:
        if not config_file.is_file():
            raise SettingsError(f"config file {config_file} does not exist")

        class FromFile(Settings):
            model_config = SettingsConfigDict(toml_file=config_file)

        settings_cls = FromFile
    try:
        return settings_cls(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None
    except (OSError, ValueError) as exc:  # an unreadable or malformed TOML file
        raise SettingsError(f"cannot read the config file: {exc}") from None
