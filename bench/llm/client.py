"""OpenAI-compatible chat completions with tool calling, retries and token accounting.

    client = LLMClient(models.role("agent"), role="agent")
    result = await client.chat(messages, tools=tools, ledger=attempt_ledger)
    result.content, result.tool_calls, result.usage

The client serves the three roles (agent, simulated user, rubric judge), each
with its own `RoleConfig`. What a failed request means is decided in one place,
`refusal_kind`, by status and body:

- `context_limit`: the conversation no longer fits the model's context (OpenAI's
  `context_length_exceeded`, vLLM's and llama.cpp's words for it): raised as
  `ContextLimitExceeded`, the agent's own doing (a finish reason, scored), never retried;
- `incompatible`: a deterministic validation refusal (400/422, or a 500 whose body
  says the request is invalid, as llama-cpp-python's pydantic errors do): the
  endpoint cannot take what tbx sends, so `ModelEndpointError` with the cause
  `model endpoint incompatible` and the server's message, not retried anywhere;
- `transient`: 408/409/429 and every other 5xx, timeouts, connection errors and
  malformed JSON bodies: retried (tenacity: exponential backoff with jitter,
  `Retry-After` honoured up to the cap), then `ModelEndpointError`;
- `refused`: any other 4xx (401/404/...): `ModelEndpointError` at once.

No `Authorization` header is sent when the role has no key (a local server).
Every completed call is recorded with its input / cached / output tokens in
the client's ledger and in the `ledger` passed to `chat` (one per attempt).
The time a call waits (for a slot under the role's `max_concurrency`, then for
the endpoint) is reported to the attempt's `ModelWait` (`model_wait`), which
stops the attempt's wall clock meanwhile: a slow endpoint is not the agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import json
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

import httpx2
import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, Field
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    before_sleep_log,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
)
from tenacity.stop import stop_base

from bench.llm.config import ModelsConfig, RoleConfig
from sandbox import Fault, backoff_delay, exponential_backoff

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx
VALIDATION_STATUS = frozenset({400, 422})
# A request too long for the model's context, in the words of OpenAI (code
# context_length_exceeded), vLLM ("maximum context length", "maximum model length"),
# llama.cpp's server ("exceeds the available context size", exceed_context_size_error)
# and llama-cpp-python ("exceed context window").
CONTEXT_LIMIT = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|maximum model length"
    r"|exceeds? (?:the )?(?:available )?context (?:size|window|length)|context window of",
    re.IGNORECASE,
)
# A 500 that is really a validation refusal (a server that lets a pydantic/JSON-schema
# error escape as 500, as llama-cpp-python does for `content: null`): deterministic, so
# not retried. A 500 saying anything else (overloaded, out of memory, a crash) is transient.
INVALID_REQUEST = re.compile(
    r"Input should be|validation error|Field required|Extra inputs are not permitted"
    r"|invalid_request_error|invalid request|is not valid under any of the given schemas",
    re.IGNORECASE,
)
RefusalKind = Literal["context_limit", "incompatible", "transient", "refused"]

Sleep = Callable[[float], Awaitable[None]]


INCOMPATIBLE = Fault("model endpoint incompatible", retryable=False)


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
        incompatible: bool = False,
    ):
        super().__init__(message)
        self.role = role
        self.model = model
        self.base_url = base_url
        self.attempts = attempts
        self.status = status
        self.retryable = retryable
        self.trajectory: Any = None  # set by the agent loop: what was recorded before the failure
        if incompatible:  # the endpoint cannot take what tbx sends: a new try would send the same
            self.fault = INCOMPATIBLE


class ContextLimitExceeded(RuntimeError):
    """The endpoint refused a request because the conversation no longer fits the model's
    context: the agent filled its own context (finish reason `context_limit`, scored as
    the agent's failure; a new try would fill it again)."""

    def __init__(self, message: str, *, role: str, model: str, base_url: str, status: int):
        super().__init__(message)
        self.role, self.model, self.base_url, self.status = role, model, base_url, status

    def endpoint_error(self) -> ModelEndpointError:
        """The same refusal as a system error, for a role other than the agent's (the simulated
        user's model cannot hold the benchmark's conversation: the endpoint's limit)."""
        return ModelEndpointError(
            str(self),
            role=self.role,
            model=self.model,
            base_url=self.base_url,
            attempts=1,
            status=self.status,
            retryable=False,
            incompatible=True,
        )


class ModelWaitExceeded(ModelEndpointError):
    """The attempt waited on model endpoints past its bound (`ModelWait.limit`: a multiple of
    the wall clock, bench.defaults). The endpoint's slowness, not the agent's: a system error
    of cause `model endpoint`, tried again (a shared endpoint's load passes; the run's retry
    budget bounds the tries). The request in flight when the bound passed was let finish
    (bounded by the role's `timeout`) and its tokens recorded: they were spent."""


class ModelWait:
    """Time one attempt spent waiting on model endpoints (a slot, then the reply), the wall
    clock it stops meanwhile (`asyncio.Timeout`, moved on by the time waited), and the bound
    on that time (`limit` seconds, None: none)."""

    def __init__(self, clock: asyncio.Timeout | None = None, limit: float | None = None) -> None:
        self.clock = clock
        self.limit = limit
        self.seconds = 0.0
        self._depth = 0
        self._started = 0.0
        self._remaining: float | None = None

    def elapsed(self) -> float:
        """Seconds waited so far, the wait in progress included."""
        return self.seconds + (time.perf_counter() - self._started if self._depth else 0.0)

    def left(self) -> float | None:
        """Seconds of model wait the attempt may still spend (None: unbounded)."""
        return None if self.limit is None else self.limit - self.elapsed()

    def spent(self) -> bool:
        left = self.left()
        return left is not None and left <= 0

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        if self._depth == 0:
            self._started = time.perf_counter()
            when = self.clock.when() if self.clock is not None else None
            if self.clock is not None and when is not None and not self.clock.expired():
                loop = asyncio.get_running_loop()
                self._remaining = when - loop.time()
                self.clock.reschedule(None)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - self._started
                if self.clock is not None and self._remaining is not None:
                    self.clock.reschedule(asyncio.get_running_loop().time() + self._remaining)
                    self._remaining = None


# The attempt whose model calls are being made (set by the agent loop for its task).
MODEL_WAIT: contextvars.ContextVar[ModelWait | None] = contextvars.ContextVar("tbx_model_wait", default=None)


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
        # "" rather than null beside tool calls: some servers refuse null (llama-cpp-python: 500)
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
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


def _body_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    text = (
        json.dumps(body, ensure_ascii=False, default=str)
        if isinstance(body, (dict, list))
        else str(body or "")
    )
    return f"{text} {exc.message}"


def refusal_kind(exc: BaseException) -> RefusalKind:
    """What a failed request means (see the module doc): the one classification."""
    if isinstance(exc, openai.APIStatusError):
        status, text = exc.status_code, _body_text(exc)
        if (400 <= status < 500 or status == 500) and CONTEXT_LIMIT.search(text):
            return "context_limit"
        if status in VALIDATION_STATUS or (status == 500 and INVALID_REQUEST.search(text)):
            return "incompatible"
        if status in RETRY_STATUS or status >= 500:
            return "transient"
        return "refused"
    if isinstance(exc, (openai.APIConnectionError, json.JSONDecodeError)):  # incl. APITimeoutError
        return "transient"
    return "refused"


def is_retryable(exc: BaseException) -> bool:
    """Worth another try: 408/409/429/5xx but a validation refusal, timeouts, connection
    errors, and a body that is not JSON (a reply cut short by a proxy or an overloaded server)."""
    return refusal_kind(exc) == "transient"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, (str, dict)) else exc.message
        return f"HTTP {exc.status_code}: {str(body)[:300]}"
    return f"{exc.__class__.__name__}: {exc}"


class _stop_when_spent(stop_base):
    """No new try once the attempt's model wait is spent (tenacity stop)."""

    def __init__(self, wait: ModelWait | None) -> None:
        self.wait = wait

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.wait is not None and self.wait.spent()


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
        key = config.resolved_api_key()
        # Without a key no Authorization header is sent (the SDK insists on a key string).
        self._headers: dict[str, Any] = {} if key else {"Authorization": openai.Omit()}
        self._slots = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        self._client = AsyncOpenAI(
            api_key=key or "unused",
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

    async def _post(self, body: dict[str, Any], wait: ModelWait | None = None) -> tuple[ChatCompletion, int]:
        """One chat completion, retried (no new try once the attempt's model wait is spent);
        (response, requests made)."""
        retrying = AsyncRetrying(
            stop=stop_any(stop_after_attempt(self.config.max_retries + 1), _stop_when_spent(wait)),
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
                    resp = await self._client.post(
                        "/chat/completions",
                        body=body,
                        cast_to=ChatCompletion,
                        options={"headers": self._headers},
                    )
                    return resp, attempt.retry_state.attempt_number
        except openai.APIStatusError as exc:
            n = retrying.statistics["attempt_number"]
            kind = refusal_kind(exc)
            if kind == "context_limit":
                raise ContextLimitExceeded(
                    f"the conversation exceeds the context of {self.config.model}: {_describe(exc)}",
                    role=self.role,
                    model=self.config.model,
                    base_url=self.config.base_url,
                    status=exc.status_code,
                ) from exc
            if kind == "incompatible":
                # what to change, when the server names a setting the role has
                hint = (
                    " (the role's `tool_choice: omit` sends none)" if "tool_choice" in _body_text(exc) else ""
                )
                raise self._error(
                    f"refused the request as invalid (an endpoint incompatibility, not retried): "
                    f"{_describe(exc)}{hint}",
                    n,
                    exc.status_code,
                    False,
                    incompatible=True,
                ) from exc
            if exc.status_code in (401, 403):
                raise self._error(
                    f"rejected the API key: {_describe(exc)}; {self.config.key_hint()}",
                    n,
                    exc.status_code,
                    False,
                ) from exc
            if kind == "refused":
                raise self._error(
                    f"rejected the request: {_describe(exc)}", n, exc.status_code, False
                ) from exc
            raise self._error(
                f"still failing after {n} attempts: {_describe(exc)}", n, exc.status_code, True
            ) from exc
        except (
            openai.APITimeoutError
        ) as exc:  # connected or not, it did not answer in time: not "unreachable"
            n = retrying.statistics["attempt_number"]
            raise self._error(
                f"did not answer within {self.config.timeout:g} s (the role's timeout), {n} times: "
                f"{_describe(exc)}; busy or slow? raise timeout or lower max_concurrency",
                n,
                None,
                True,
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

    @contextlib.asynccontextmanager
    async def _slot(self, wait: ModelWait | None) -> AsyncIterator[None]:
        """A slot under the role's `max_concurrency`; the queue for it ends with the attempt's
        model-wait bound (nothing was sent: nothing spent)."""
        if self._slots is None:
            yield
            return
        try:
            async with asyncio.timeout(wait.left() if wait is not None else None):
                await self._slots.acquire()
        except TimeoutError:
            assert wait is not None  # no other timeout here
            raise self._over_wait(wait, 0) from None
        try:
            yield
        finally:
            self._slots.release()

    def _over_wait(self, wait: ModelWait, attempts: int) -> ModelWaitExceeded:
        cfg = self.config
        return ModelWaitExceeded(
            f"{self.role} model endpoint {cfg.base_url} (model {cfg.model}): the attempt waited "
            f"{wait.elapsed():.1f} s on model endpoints, past its bound of {wait.limit:g} s "
            f"(model_wait_factor times the wall clock); the endpoint is too slow or too busy: "
            f"lower max_concurrency, or raise --wall-clock or the models config's model_wait_factor",
            role=self.role,
            model=cfg.model,
            base_url=cfg.base_url,
            attempts=attempts,
        )

    def _error(
        self, msg: str, attempts: int, status: int | None, retryable: bool, *, incompatible: bool = False
    ) -> ModelEndpointError:
        cfg = self.config
        return ModelEndpointError(
            f"{self.role} model endpoint {cfg.base_url} (model {cfg.model}) {msg}",
            role=self.role,
            model=cfg.model,
            base_url=cfg.base_url,
            attempts=attempts,
            status=status,
            retryable=retryable,
            incompatible=incompatible,
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
            if cfg.tool_choice != "omit":
                kwargs["tool_choice"] = cfg.tool_choice
            if parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = parallel_tool_calls
        kwargs.update(cfg.extra_body)

        wait = MODEL_WAIT.get()
        if wait is not None and wait.spent():
            raise self._over_wait(wait, 0)
        with wait.waiting() if wait is not None else contextlib.nullcontext():
            async with self._slot(wait):
                t0 = time.perf_counter()  # latency is the endpoint's: the slot's queue is not in it
                # Never cut short by the model-wait bound: a request sent is spent, so it is let
                # finish (each try bounded by the role's timeout) and its tokens recorded below.
                resp, attempts = await self._post(kwargs, wait)
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
        if wait is not None and wait.spent():
            raise self._over_wait(wait, attempts)

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
