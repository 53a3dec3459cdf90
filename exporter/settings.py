"""Settings of the streaming exporter, from environment variables or a TOML file.

Every setting has an environment variable ``CITATION_EXPORTER_<NAME>`` (for example
``CITATION_EXPORTER_BOOTSTRAP_SERVERS``); a TOML file named by ``CITATION_EXPORTER_CONFIG_FILE``
(or ``citation-exporter run --config FILE``) may set the same names in lower case. Environment
variables win over the file. Nothing is read at import; an invalid value stops start-up with a
message that names the setting.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from exporter.checks.engine import DEFAULT_HIGH_SEVERITY_TOPICS

__all__ = ["ENV_PREFIX", "Settings", "SettingsError", "load_settings"]

ENV_PREFIX = "CITATION_EXPORTER_"
DEFAULT_METRICS_PORT = 9877


class SettingsError(ValueError):
    """An invalid setting; the message names it and says what is expected."""


class Settings(BaseSettings):
    """What the exporter connects to, what it reads and writes, and how it judges."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # Kafka
    bootstrap_servers: str = Field("127.0.0.1:9092", min_length=1)
    group_id: str = Field("citation-drift-exporter", min_length=1)
    chunks_topic: str = Field("rag.chunks", min_length=1)
    answers_topic: str = Field("rag.answers", min_length=1)
    verdicts_topic: str = Field("rag.citation-verdicts", min_length=1)
    dlq_topic: str = Field("rag.citation-events.dlq", min_length=1)
    control_topic: str = Field("rag.control", min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    max_message_bytes: int = Field(1_048_576, gt=0)
    publish_all_verdicts: bool = False

    # checks
    threshold: float = Field(98.0, gt=0.0, le=100.0)
    high_severity_topics: Annotated[frozenset[str], NoDecode] = DEFAULT_HIGH_SEVERITY_TOPICS
    sources: Annotated[frozenset[str], NoDecode] = frozenset()
    max_sources: int = Field(20, ge=0)

    # sweeps
    sweep_quiet_seconds: float = Field(60.0, gt=0.0)

    # metrics endpoint
    metrics_host: str = "0.0.0.0"  # an exporter is scraped from other hosts
    metrics_port: int = Field(DEFAULT_METRICS_PORT, ge=0, le=65535)

    @field_validator("high_severity_topics", "sources", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        """Accept ``a,b,c`` from an environment variable as well as a list."""
        if isinstance(value, str):
            return frozenset(v.strip() for v in value.split(",") if v.strip())
        return value

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


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        name = ".".join(str(part) for part in item["loc"]) or "settings"
        variable = f"{ENV_PREFIX}{name.upper()}"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown setting '{name}'")
        else:
            problems.append(f"{name} ({variable}): {item['msg']}")
    return "invalid settings: " + "; ".join(problems)


def load_settings(config_file: Path | None = None, **overrides: object) -> Settings:
    """Read the settings; raise SettingsError naming each invalid one."""
    if config_file is None and os.environ.get(f"{ENV_PREFIX}CONFIG_FILE"):
        config_file = Path(os.environ[f"{ENV_PREFIX}CONFIG_FILE"])
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
