"""The model judge: asks any OpenAI-compatible chat-completions endpoint for a label.

vLLM, llama.cpp's server, Ollama and hosted APIs all take ``POST {base_url}/chat/completions``
with ``model``, ``messages``, ``temperature`` and ``max_tokens`` and answer with
``choices[0].message.content`` and (usually) ``usage``. One judgement is one such request, sent
again on a timeout to connect, a connection error, a 5xx or a 429, and given up on at the first
other failure. Whatever the endpoint does, :meth:`OpenAIJudge.judge` returns a
:class:`Judgement` (``error`` with a short reason when there is no usable answer) and never
raises: a model server is a dependency that fails, and a failure to judge decides nothing.

Bounds: one judgement takes at most ``timeout_seconds`` once it has its turn (retries and
waits included, a slow-drip reply cut there too); at most ``concurrency`` requests are in
flight; a reply's body is read up to :data:`MAX_REPLY_BYTES`; redirects are not followed (a
POST carrying the key goes to the configured endpoint or nowhere). The API key is sent as
``Authorization: Bearer`` and appears in no repr, reason or log line.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

import httpx
import orjson

from exporter.config.judge import OpenAIJudgeConfig
from exporter.entailment.labels import messages, parse_label
from exporter.entailment.results import EntailmentResult, Judgement
from exporter.records.limits import bounded, preview

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_CAP_SECONDS",
    "MAX_REPLY_BYTES",
    "RETRY_AFTER_CAP_SECONDS",
    "OpenAIJudge",
    "OpenAIJudgeConfig",
    "retry_after_seconds",
]

log = logging.getLogger(__name__)

# A reply is a label or a small JSON object: 64 KiB is hundreds of times that, and a body past
# it is cut there (not read to its end) and is an error.
MAX_REPLY_BYTES = 65_536
# Waits between attempts: 0.25 s, 0.5 s, 1 s, ... (doubling, at most BACKOFF_CAP_SECONDS), each
# drawn between half and all of that ("equal jitter"), so judges that failed together do not
# come back together.
BACKOFF_BASE_SECONDS = 0.25
BACKOFF_CAP_SECONDS = 8.0
# A Retry-After (429, 503) is honoured up to this many seconds, plus up to BACKOFF_BASE_SECONDS
# of jitter. A wait that would end past the judgement's deadline is not begun: it is an error.
RETRY_AFTER_CAP_SECONDS = 30.0
# Connecting may take at most this long (or the whole deadline, if shorter) before the attempt
# counts as a timeout and is retried; reading a reply may take what is left of the deadline.
CONNECT_TIMEOUT_SECONDS = 5.0
# Token counts above this are not believed (and would make the cost meaningless).
_MAX_TOKENS_REPORTED = 1_000_000_000
# A 4xx reply's own error message is quoted in the reason, this long at most.
_SERVER_MESSAGE_CHARS = 160


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (not capped), or None when it is
    absent or unreadable. Either delay-seconds (``120``) or an HTTP-date; a date in the past is
    a wait of 0."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value) if len(value) <= 9 else float(RETRY_AFTER_CAP_SECONDS * 10)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class _Retry(Exception):  # noqa: N818 - a signal between the attempt and its loop
    """This attempt failed in a way worth another; ``after`` is the server's wish, if any."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


@dataclass(slots=True)
class _Spent:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_missing: bool = False


@dataclass(frozen=True, slots=True)
class _Outcome:
    result: EntailmentResult
    reason: str | None


class OpenAIJudge:
    """Judges claims against evidence by asking a chat-completions endpoint.

    ``transport`` replaces httpx's network transport (``httpx.MockTransport`` in unit tests).
    Use as an async context manager, or call :meth:`aclose` when done.
    """

    name = "openai"

    def __init__(
        self,
        config: OpenAIJudgeConfig,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._rng = rng or random.Random()
        self._slots = asyncio.Semaphore(config.concurrency)
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if config.api_key is not None:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.AsyncClient(
            transport=transport,
            headers=headers,
            limits=httpx.Limits(
                max_connections=config.concurrency,
                max_keepalive_connections=config.concurrency,
            ),
            timeout=httpx.Timeout(
                config.timeout_seconds,
                connect=min(CONNECT_TIMEOUT_SECONDS, config.timeout_seconds),
            ),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"OpenAIJudge(base_url={self.config.base_url!r}, model={self.config.model!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def judge(self, claim: str, evidence: str) -> Judgement:
        """One judgement of ``claim`` against ``evidence``; never raises (but is cancellable).

        Waits for one of ``concurrency`` slots first; ``seconds`` and the deadline run from
        when it has one. Tokens and cost are those of the attempts that reported usage.
        """
        async with self._slots:
            started = time.monotonic()
            spent = _Spent()
            try:
                outcome = await self._attempts(claim, evidence, spent)
            except Exception as exc:  # a bug or a closed client: still a judgement
                log.warning("model judge failed: %s", type(exc).__name__)
                outcome = _Outcome(EntailmentResult.ERROR, f"failed: {type(exc).__name__}")
            seconds = time.monotonic() - started
        config = self.config
        cost = (
            spent.prompt_tokens * config.price_input_per_1k
            + spent.completion_tokens * config.price_output_per_1k
        ) / 1000
        reason = outcome.reason
        if spent.usage_missing and outcome.result is not EntailmentResult.ERROR:
            reason = "no usage reported: tokens and cost unknown"
        return Judgement(
            result=outcome.result,
            judge=self.name,
            reason=None if reason is None else self._clean(reason),
            seconds=seconds,
            cost_usd=cost,
            prompt_tokens=spent.prompt_tokens,
            completion_tokens=spent.completion_tokens,
        )

    def _clean(self, reason: str) -> str:
        """A reason bounded, and without the key (again: each text a server sent is redacted
        before it is cut, so that no part of the key survives a cut)."""
        return bounded(_redacted(reason, self.config.api_key), 240)

    async def _attempts(self, claim: str, evidence: str, spent: _Spent) -> _Outcome:
        config = self.config
        body = orjson.dumps(
            {
                "model": config.model,
                "messages": messages(claim, evidence),
                "temperature": 0,
                "max_tokens": config.max_tokens,
            }
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.timeout_seconds
        reason: str | None = None
        try:
            async with asyncio.timeout_at(deadline):
                for attempt in range(config.max_retries + 1):
                    try:
                        return await self._attempt(body, spent)
                    except _Retry as retry:
                        reason = retry.reason
                        if attempt == config.max_retries:
                            break
                        wait = self._wait(attempt, retry.after)
                        if loop.time() + wait >= deadline:
                            log.debug("model judge: %s; no time left to retry", reason)
                            break
                        log.debug("model judge: %s; retrying in %.2f s", reason, wait)
                        await asyncio.sleep(wait)
        except TimeoutError:
            after = "" if reason is None else f" (after {reason})"
            return _Outcome(EntailmentResult.ERROR, f"timeout{after}")
        return _Outcome(EntailmentResult.ERROR, reason or "no attempt made")

    def _wait(self, attempt: int, after: float | None) -> float:
        if after is not None:
            return min(after, RETRY_AFTER_CAP_SECONDS) + self._rng.uniform(0, BACKOFF_BASE_SECONDS)
        backoff = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2.0**attempt)
        return backoff / 2 + self._rng.uniform(0, backoff / 2)

    async def _attempt(self, body: bytes, spent: _Spent) -> _Outcome:
        """One request: an outcome, or :class:`_Retry` when another attempt may do better."""
        key = self.config.api_key
        try:
            async with self._client.stream(
                "POST",
                self.config.url,
                content=body,
                headers={"Content-Type": "application/json"},
            ) as response:
                status = response.status_code
                retry = status == 429 or 500 <= status <= 599
                if retry or not 200 <= status <= 299:
                    after = retry_after_seconds(response.headers.get("Retry-After"))
                    message = await _server_message(response, key) if 400 <= status < 500 else None
                    reason = f"http {status}"
                    if 300 <= status < 400:
                        reason += " (redirects are not followed)"
                    elif message and status not in (401, 403, 429):
                        reason += f": {message}"
                    if retry:
                        raise _Retry(reason, after if status in (429, 503) else None)
                    return _Outcome(EntailmentResult.ERROR, reason)
                encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
                if encoding != "identity":
                    return _Outcome(
                        EntailmentResult.ERROR, f"reply is encoded ({preview(encoding)})"
                    )
                raw = await _read_capped(response)
        except httpx.ConnectTimeout as exc:
            raise _Retry("connect timeout") from exc
        except httpx.TimeoutException as exc:
            raise _Retry("timeout") from exc
        except httpx.ConnectError as exc:
            raise _Retry(_connect_reason(exc, key)) from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise _Retry(f"{type(exc).__name__}: {preview(_redacted(str(exc), key))}") from exc
        except httpx.HTTPError as exc:
            text = preview(_redacted(str(exc), key))
            return _Outcome(EntailmentResult.ERROR, f"{type(exc).__name__}: {text}")
        if raw is None:
            return _Outcome(
                EntailmentResult.ERROR, f"reply too large (over {MAX_REPLY_BYTES:,} bytes)"
            )
        return _read_reply(raw, spent, key)


def _redacted(text: str, key: str | None) -> str:
    return text.replace(key, "[redacted]") if key else text


async def _read_capped(response: httpx.Response) -> bytes | None:
    """The body, or None when it is longer than MAX_REPLY_BYTES (read no further than that)."""
    declared = response.headers.get("Content-Length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():  # no decoding: encoded replies are refused
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _server_message(response: httpx.Response, key: str | None) -> str | None:
    """The ``error.message`` (or ``error``, or ``detail``) of an error reply, short; else None."""
    try:
        raw = await _read_capped(response)
    except httpx.HTTPError:
        return None
    if not raw:
        return None
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, dict):
        error = value.get("error", value.get("detail"))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str) and error.strip():
            # no control or format characters: a reason may be shown on a terminal
            shown = "".join(c for c in error if c.isprintable() or c.isspace())
            text = " ".join(_redacted(shown, key).split())
            if len(text) > _SERVER_MESSAGE_CHARS:
                text = text[: _SERVER_MESSAGE_CHARS - 3] + "..."
            return text
    return None


def _connect_reason(exc: httpx.ConnectError, key: str | None) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    return f"connection failed: {preview(_redacted(text, key))}"


def _read_reply(raw: bytes, spent: _Spent, key: str | None) -> _Outcome:
    """A 2xx body: its label, and its usage added to ``spent``."""
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _Outcome(EntailmentResult.ERROR, "reply is not JSON (or not UTF-8)")
    if not isinstance(value, dict):
        return _Outcome(EntailmentResult.ERROR, "reply is not a JSON object")
    _add_usage(value.get("usage"), spent)
    choices = value.get("choices")
    content: Any = None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            content = message.get("content")
    if not isinstance(content, str):
        return _Outcome(EntailmentResult.ERROR, "reply has no choices[0].message.content")
    label = parse_label(content)
    if label is None:
        return _Outcome(
            EntailmentResult.ERROR,
            f"no label in the reply: {preview(_redacted(content, key))}",
        )
    return _Outcome(label, None)


def _add_usage(usage: Any, spent: _Spent) -> None:
    def count(name: str) -> int | None:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value if 0 <= value <= _MAX_TOKENS_REPORTED else None
        return None

    prompt = completion = None
    if isinstance(usage, dict):
        prompt, completion = count("prompt_tokens"), count("completion_tokens")
    if prompt is None or completion is None:
        spent.usage_missing = True
        return
    spent.prompt_tokens += prompt
    spent.completion_tokens += completion
