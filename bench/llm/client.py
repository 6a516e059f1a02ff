"""OpenAI-compatible chat completions with tool calling, retries and token accounting.

    client = LLMClient(models.role("agent"), role="agent")
    result = await client.chat(messages, tools=tools, ledger=attempt_ledger)
    result.content, result.tool_calls, result.usage

The client serves the three roles (agent, simulated user, rubric judge), each
with its own `RoleConfig`. Retries (tenacity: exponential backoff with jitter,
`Retry-After` honoured up to the cap) cover 408/409/429/5xx, timeouts,
connection errors and malformed JSON bodies. When they run out,
or the endpoint rejects a request outright (400/401/404/...), the call raises
`ModelEndpointError`: a system error for the runner, never an agent failure.
Every completed call is recorded with its input / cached / output tokens in
the client's ledger and in the `ledger` passed to `chat` (one per attempt).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx2
import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, Field
from tenacity import AsyncRetrying, RetryCallState, before_sleep_log, retry_if_exception, stop_after_attempt

from bench.llm.config import ModelsConfig, RoleConfig
from sandbox import Fault, backoff_delay, exponential_backoff

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx

Sleep = Callable[[float], Awaitable[None]]


class ModelEndpointError(RuntimeError):
    """A model endpoint failed for reasons outside the model's control. (`retryable` is
    whether the endpoint may answer another request; a run tries the attempt again
    either way: `fault`.)"""

    fault = Fault("model endpoint")

    def __init__(
        self,
        message: str,
        *,
        role: str,
        model: str,
        base_url: str,
        attempts: int,
        status: int | None = None,
        retryable: bool = True,
    ):
        super().__init__(message)
        self.role = role
        self.model = model
        self.base_url = base_url
        self.attempts = attempts
        self.status = status
        self.retryable = retryable
        self.trajectory: Any = None  # set by the agent loop: what was recorded before the failure


# ---------------------------------------------------------------- usage


class Usage(BaseModel):
    """Token totals. `input_tokens` includes `cached_tokens` (OpenAI's `prompt_tokens`)."""

    model: str | None = None
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0

    def plus(self, other: Usage) -> Usage:
        names = [m for u in (self, other) if u.model for m in u.model.split(",")]
        model = ",".join(dict.fromkeys(names)) or None
        return Usage(
            model=model,
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            latency_ms=self.latency_ms + other.latency_ms,
        )


class CallUsage(BaseModel):
    role: str
    model: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 1


class UsageLedger:
    """Per-call usage records and per-role totals."""

    def __init__(self) -> None:
        self.calls: list[CallUsage] = []

    def record(self, call: CallUsage) -> None:
        self.calls.append(call)

    def by_role(self) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for c in self.calls:
            u = Usage(
                model=c.model,
                calls=1,
                input_tokens=c.input_tokens,
                cached_tokens=c.cached_tokens,
                output_tokens=c.output_tokens,
                latency_ms=c.latency_ms,
            )
            out[c.role] = out[c.role].plus(u) if c.role in out else u
        return out

    def cost(self, config: ModelsConfig) -> dict[str, float | None]:
        """USD per role; None for a role whose model has no price."""
        out: dict[str, float | None] = {}
        for c in self.calls:
            v = config.cost(c.model, c.input_tokens, c.cached_tokens, c.output_tokens)
            if c.role in out and out[c.role] is None:
                continue
            out[c.role] = None if v is None else (out.get(c.role) or 0.0) + v
        return out


# ---------------------------------------------------------------- results


def model_text(value: Any) -> str:
    """A field of the model's reply as text that can be sent and stored: the
    response is parsed leniently, so a field may be missing, of another JSON type
    (an `arguments` object instead of its JSON text) or hold lone UTF-16
    surrogates, which no UTF-8 request or file can carry (they become U+FFFD).
    What the text means is judged later, as the model's own output."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class ToolCallRequest(BaseModel):
    """A tool call as the model wrote it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = ""


class ChatResult(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: CallUsage

    def assistant_message(self) -> dict[str, Any]:
        """The OpenAI-format assistant message to append to the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                for tc in self.tool_calls
            ]
        return msg


# ---------------------------------------------------------------- client


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers if exc.response is not None else {}
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if not raw:
            continue
        try:
            value = float(raw)
            return value / 1000.0 if name == "retry-after-ms" else value
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(raw) if name == "retry-after" else None
            if parsed is not None:
                return max(parsed.timestamp() - time.time(), 0.0)
    return None


def is_retryable(exc: BaseException) -> bool:
    """Worth another try: 408/409/429/5xx, timeouts, connection errors, and a body
    that is not JSON (a reply cut short by a proxy or an overloaded server)."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUS or exc.status_code >= 500
    return isinstance(exc, (openai.APIConnectionError, json.JSONDecodeError))  # incl. APITimeoutError


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, (str, dict)) else exc.message
        return f"HTTP {exc.status_code}: {str(body)[:300]}"
    return f"{exc.__class__.__name__}: {exc}"


class LLMClient:
    """One role's endpoint. Safe to share between concurrent attempts."""

    def __init__(
        self,
        config: RoleConfig,
        role: str = "agent",
        *,
        http_client: httpx2.AsyncClient | None = None,
        ledger: UsageLedger | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ):
        self.config = config
        self.role = role
        self.ledger = ledger if ledger is not None else UsageLedger()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = exponential_backoff(config.backoff_initial, config.backoff_max, jitter=self._rng)
        self._client = AsyncOpenAI(
            api_key=config.resolved_api_key(),
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=0,  # retries are ours: counted, logged and turned into ModelEndpointError
            http_client=http_client,
        )

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Delay before retry number `attempt` (1-based): the endpoint's Retry-After when it
        sent one, else the shared exponential backoff with jitter (sandbox.backoff)."""
        cfg = self.config
        if retry_after is not None:
            return min(max(retry_after, 0.0), cfg.backoff_max)
        return backoff_delay(self._backoff, attempt)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        after = _retry_after(exc) if isinstance(exc, openai.APIStatusError) else None
        return self.backoff(state.attempt_number, after)

    async def _post(self, body: dict[str, Any]) -> tuple[ChatCompletion, int]:
        """One chat completion, retried; (response, requests made)."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(is_retryable),
            sleep=self._sleep,
            before_sleep=before_sleep_log(log, logging.INFO),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    # The body is already plain JSON: posting it skips the SDK's per-call walk of the
                    # typed params (about 30 ms of CPU with a domain's tool list), same errors and parsing.
                    resp = await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)
                    return resp, attempt.retry_state.attempt_number
        except openai.APIStatusError as exc:
            n = retrying.statistics["attempt_number"]
            if not is_retryable(exc):
                raise self._error(
                    f"rejected the request: {_describe(exc)}", n, exc.status_code, False
                ) from exc
            raise self._error(
                f"still failing after {n} attempts: {_describe(exc)}", n, exc.status_code, True
            ) from exc
        except openai.APIConnectionError as exc:
            n = retrying.statistics["attempt_number"]
            raise self._error(f"unreachable after {n} attempts: {_describe(exc)}", n, None, True) from exc
        except json.JSONDecodeError as exc:
            n = retrying.statistics["attempt_number"]
            raise self._error(f"sent malformed JSON {n} times: {exc}", n, None, True) from exc
        except openai.APIResponseValidationError as exc:
            n = retrying.statistics["attempt_number"]
            raise self._error(f"sent an invalid response: {_describe(exc)}", n, None, False) from exc
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    def _error(self, msg: str, attempts: int, status: int | None, retryable: bool) -> ModelEndpointError:
        cfg = self.config
        return ModelEndpointError(
            f"{self.role} model endpoint {cfg.base_url} (model {cfg.model}) {msg}",
            role=self.role,
            model=cfg.model,
            base_url=cfg.base_url,
            attempts=attempts,
            status=status,
            retryable=retryable,
        )

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        parallel_tool_calls: bool | None = None,
        attempt_seed: int = 0,
        ledger: UsageLedger | None = None,
        max_tokens: int | None = None,
    ) -> ChatResult:
        """One completion. `max_tokens` (when given) replaces the role's setting."""
        cfg = self.config
        kwargs: dict[str, Any] = {"model": cfg.model, "messages": list(messages)}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        seed = cfg.request_seed(attempt_seed)
        if seed is not None:
            kwargs["seed"] = seed
        if (max_tokens or cfg.max_tokens) is not None:
            kwargs["max_tokens"] = max_tokens or cfg.max_tokens
        if tools:
            kwargs["tools"] = list(tools)
            if parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = parallel_tool_calls
        kwargs.update(cfg.extra_body)

        t0 = time.perf_counter()
        resp, attempts = await self._post(kwargs)
        latency_ms = (time.perf_counter() - t0) * 1000
        usage = CallUsage(role=self.role, model=cfg.model, latency_ms=latency_ms, attempts=attempts)
        if resp.usage is not None:
            usage.input_tokens = resp.usage.prompt_tokens or 0
            usage.output_tokens = resp.usage.completion_tokens or 0
            details = resp.usage.prompt_tokens_details
            usage.cached_tokens = (details.cached_tokens or 0) if details is not None else 0
        self.ledger.record(usage)
        if ledger is not None and ledger is not self.ledger:
            ledger.record(usage)

        if not resp.choices:
            return ChatResult(finish_reason=None, usage=usage)
        choice = resp.choices[0]
        msg = choice.message
        calls: list[ToolCallRequest] = []
        for i, tc in enumerate(msg.tool_calls or []):
            fn = getattr(tc, "function", None)
            if fn is None:  # a custom (non-function) tool call: not something we offered
                continue
            calls.append(
                ToolCallRequest(
                    id=model_text(tc.id) or f"call_{len(messages)}_{i}",
                    name=model_text(fn.name),
                    arguments=model_text(fn.arguments),
                )
            )
        content = None if msg.content is None else model_text(msg.content)
        return ChatResult(content=content, tool_calls=calls, finish_reason=choice.finish_reason, usage=usage)
