"""The model judge's configuration: where it sends its questions and what it may spend.

Checked when it is made (a URL with a host, no credentials in it, a key a header can carry), so
a judge that could never work is refused with the settings, at start-up.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import httpx

from exporter.errors import SettingsError
from exporter.records.limits import preview

__all__ = ["OpenAIJudgeConfig"]

# What an API key may hold: the visible ASCII characters an HTTP header value can carry.
_HEADER_TOKEN = re.compile(r"[!-~]+")


@dataclass(frozen=True, slots=True)
class OpenAIJudgeConfig:
    """Where the model judge sends its questions and what it may spend on them.

    ``base_url`` is the API root, ``/chat/completions`` is appended
    (``http://127.0.0.1:8000/v1``). Prices are US dollars per 1,000 tokens.
    ``timeout_seconds`` bounds one judgement, every attempt and wait included.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_seconds: float = 30.0
    concurrency: int = 4
    price_input_per_1k: float = 0.0
    price_output_per_1k: float = 0.0
    max_retries: int = 3
    max_tokens: int = 16

    def __post_init__(self) -> None:
        try:
            url = httpx.URL(self.base_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise SettingsError(f"judge base_url is not a URL: {preview(self.base_url)}") from exc
        if url.scheme not in ("http", "https") or not url.host:
            raise SettingsError(
                f"judge base_url must be an http:// or https:// URL with a host, got "
                f"{preview(self.base_url)}"
            )
        if url.port is not None and not 0 < url.port <= 65535:  # httpx takes any number
            raise SettingsError(f"judge base_url has port {url.port:,}, not 1 to 65535")
        if url.userinfo:
            raise SettingsError("judge base_url must not hold credentials: set the API key")
        if url.query or url.fragment:
            raise SettingsError(
                f"judge base_url must not have a query or fragment, got {preview(self.base_url)}"
            )
        if not self.model.strip():
            raise SettingsError("judge model must not be empty")
        if self.api_key is not None and not self.api_key.strip():
            raise SettingsError("judge API key is empty: leave it unset to send none")
        if self.api_key is not None and not _HEADER_TOKEN.fullmatch(self.api_key):
            # it is sent as "Authorization: Bearer KEY": any other character cannot go in a
            # header, and the error refusing the header would quote the key
            raise SettingsError(
                "judge API key must be printable ASCII without spaces or line breaks "
                "(a key read from a file with its newline?)"
            )
        if not 0 < self.timeout_seconds < math.inf:
            raise SettingsError(
                f"judge timeout_seconds must be positive, got {self.timeout_seconds}"
            )
        if self.concurrency < 1:
            raise SettingsError(f"judge concurrency must be at least 1, got {self.concurrency}")
        for name in ("price_input_per_1k", "price_output_per_1k"):
            price = getattr(self, name)
            if not 0 <= price < math.inf:
                raise SettingsError(f"judge {name} must be a finite price >= 0, got {price}")
        if not 0 <= self.max_retries <= 10:
            raise SettingsError(f"judge max_retries must be 0 to 10, got {self.max_retries}")
        if not 1 <= self.max_tokens <= 4096:
            raise SettingsError(f"judge max_tokens must be 1 to 4096, got {self.max_tokens}")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"
