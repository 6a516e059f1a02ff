"""bench.llm.client and bench.llm.config: retries, endpoint errors, usage accounting, config files."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx2
import pytest

from bench.llm.client import CallUsage, LLMClient, ModelEndpointError, UsageLedger
from bench.llm.config import (
    ModelsConfig,
    ModelsConfigError,
    Price,
    RoleConfig,
    load_models_config,
    parse_models_config,
)

REPO = Path(__file__).resolve().parents[4]


def completion(content: str | None = "hi", *, tool_calls: list[dict[str, Any]] | None = None, usage=None):
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": msg}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


class Scripted:
    """An httpx2 transport handler answering from a list of (status, body, headers)."""

    def __init__(self, replies: list[tuple[int, Any, dict[str, str]]]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        status, body, headers = self.replies.pop(0)
        return httpx2.Response(status, json=body, headers=headers)


def role(**kw: Any) -> RoleConfig:
    base: dict[str, Any] = {
        "base_url": "http://model.test/v1",
        "model": "m",
        "api_key": "k",
        "backoff_initial": 0.5,
    }
    return RoleConfig(**{**base, **kw})


def client_with(handler: Scripted, cfg: RoleConfig, sleeps: list[float], **kw: Any) -> LLMClient:
    async def sleep(d: float) -> None:
        sleeps.append(d)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return LLMClient(cfg, http_client=http, sleep=sleep, **kw)


async def test_retries_429_and_503_with_backoff_then_succeeds() -> None:
    handler = Scripted(
        [
            (429, {"error": {"message": "slow down"}}, {}),
            (503, {"error": {"message": "busy"}}, {}),
            (
                200,
                completion("ok", usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}),
                {},
            ),
        ]
    )
    sleeps: list[float] = []
    async with client_with(handler, role(), sleeps) as client:
        result = await client.chat([{"role": "user", "content": "x"}])
    assert result.content == "ok"
    assert len(handler.requests) == 3
    assert result.usage.attempts == 3
    # exponential with jitter in [0.5, 1] x base: base 0.5 then 1.0
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0


async def test_retry_after_header_is_honoured_up_to_the_cap() -> None:
    handler = Scripted(
        [
            (429, {"error": {}}, {"retry-after": "2"}),
            (429, {"error": {}}, {"retry-after": "999"}),
            (200, completion(), {}),
        ]
    )
    sleeps: list[float] = []
    async with client_with(handler, role(backoff_max=7.0), sleeps) as client:
        await client.chat([{"role": "user", "content": "x"}])
    assert sleeps == [2.0, 7.0]


async def test_retries_run_out_then_model_endpoint_error() -> None:
    handler = Scripted([(500, {"error": {"message": "boom"}}, {})] * 3)
    sleeps: list[float] = []
    async with client_with(handler, role(max_retries=2), sleeps) as client:
        with pytest.raises(ModelEndpointError) as err:
            await client.chat([{"role": "user", "content": "x"}])
    assert err.value.attempts == 3 and err.value.status == 500 and err.value.retryable
    assert "HTTP 500" in str(err.value) and "model.test" in str(err.value)
    assert len(sleeps) == 2


async def test_rejected_request_is_not_retried() -> None:
    handler = Scripted([(401, {"error": {"message": "bad key"}}, {})])
    sleeps: list[float] = []
    async with client_with(handler, role(), sleeps) as client:
        with pytest.raises(ModelEndpointError) as err:
            await client.chat([{"role": "user", "content": "x"}])
    assert err.value.status == 401 and not err.value.retryable and err.value.attempts == 1
    assert "rejected" in str(err.value) and sleeps == []


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


async def test_unreachable_endpoint_raises_model_endpoint_error() -> None:
    cfg = role(
        base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_retries=2, backoff_initial=0.0, timeout=2
    )
    async with LLMClient(cfg, role="user") as client:
        with pytest.raises(ModelEndpointError) as err:
            await client.chat([{"role": "user", "content": "x"}])
    assert err.value.role == "user" and err.value.attempts == 3 and err.value.status is None
    assert "unreachable after 3 attempts" in str(err.value)


async def test_request_shape_and_tool_calls() -> None:
    handler = Scripted(
        [
            (
                200,
                completion(
                    None,
                    tool_calls=[
                        {"id": "a1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
                    ],
                ),
                {},
            )
        ]
    )
    cfg = role(temperature=0.2, seed=100, max_tokens=50, extra_body={"top_k": 3})
    tools = [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    ]
    async with client_with(handler, cfg, []) as client:
        result = await client.chat(
            [{"role": "user", "content": "x"}], tools=tools, parallel_tool_calls=False, attempt_seed=7
        )
    req = handler.requests[0]
    assert req["model"] == "m" and req["temperature"] == 0.2 and req["max_tokens"] == 50
    assert req["seed"] == 107 and req["parallel_tool_calls"] is False and req["top_k"] == 3
    assert req["tools"] == tools
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("a1", "f", '{"x": 1}')]
    assert result.assistant_message()["tool_calls"][0]["function"]["name"] == "f"


async def test_usage_is_recorded_per_call_and_per_role() -> None:
    usage1 = {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}
    usage2 = {
        "prompt_tokens": 3000,
        "completion_tokens": 30,
        "total_tokens": 3030,
        "prompt_tokens_details": {"cached_tokens": 2000},
    }
    handler = Scripted([(200, completion(usage=usage1), {}), (200, completion(usage=usage2), {})])
    shared = UsageLedger()
    attempt = UsageLedger()
    async with client_with(handler, role(model="agent-m"), [], ledger=shared) as client:
        await client.chat([{"role": "user", "content": "x"}], ledger=attempt)
        await client.chat([{"role": "user", "content": "y"}])
    assert [(c.input_tokens, c.cached_tokens, c.output_tokens) for c in shared.calls] == [
        (1000, 0, 10),
        (3000, 2000, 30),
    ]
    assert len(attempt.calls) == 1
    totals = shared.by_role()["agent"]
    assert (totals.calls, totals.input_tokens, totals.cached_tokens, totals.output_tokens) == (
        2,
        4000,
        2000,
        40,
    )
    assert totals.model == "agent-m"

    config = ModelsConfig(prices={"agent-m": Price(input=2.0, cached=0.5, output=8.0)})
    # uncached 2000 x 2 + cached 2000 x 0.5 + output 40 x 8 per 1M tokens
    assert shared.cost(config)["agent"] == pytest.approx((4000 + 1000 + 320) / 1e6)
    assert UsageLedger().cost(config) == {}
    unpriced = UsageLedger()
    unpriced.record(CallUsage(role="judge", model="nope", input_tokens=5))
    assert unpriced.cost(config) == {"judge": None}


# ---------------------------------------------------------------- config


def test_example_config_loads_and_merges_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_models_config(REPO / "examples" / "model-config.yaml")
    agent = cfg.role("agent")
    assert agent.base_url == cfg.role("user").base_url == cfg.role("judge").base_url
    assert agent.api_key_env is not None and agent.api_key is None
    monkeypatch.setenv(agent.api_key_env, "secret-from-env")
    assert agent.resolved_api_key() == "secret-from-env"
    assert cfg.price(agent.model) is not None


def test_config_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelsConfigError, match="cannot read"):
        load_models_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: [unclosed\n")
    with pytest.raises(ModelsConfigError, match="invalid YAML"):
        load_models_config(bad)
    with pytest.raises(ModelsConfigError, match=r"agent\.model: Field required"):
        parse_models_config({"agent": {"base_url": "http://x"}})
    with pytest.raises(ModelsConfigError, match="temprature"):
        parse_models_config({"agent": {"base_url": "http://x", "model": "m", "temprature": 1}})
    cfg = parse_models_config(
        {"agent": {"base_url": "http://x", "model": "m", "api_key_env": "TBX_NOPE_KEY"}}
    )
    monkeypatch.delenv("TBX_NOPE_KEY", raising=False)
    assert cfg.role("agent").resolved_api_key() is None  # a local endpoint: no key, no header
    hosted = parse_models_config(
        {"agent": {"base_url": "https://api.openai.com/v1", "model": "m", "api_key_env": "TBX_NOPE_KEY"}}
    )
    with pytest.raises(ModelsConfigError, match="TBX_NOPE_KEY"):
        hosted.role("agent").resolved_api_key()
    with pytest.raises(ModelsConfigError, match="no 'judge' role"):
        cfg.role("judge")


def test_role_key_overrides_default_key_source_and_is_never_public() -> None:
    cfg = parse_models_config(
        {
            "defaults": {"base_url": "http://x/v1", "api_key_env": "SOME_ENV"},
            "agent": {"model": "a", "api_key": "inline-secret"},
            "user": {"model": "u"},
        }
    )
    assert cfg.role("agent").resolved_api_key() == "inline-secret"
    assert cfg.role("user").api_key_env == "SOME_ENV"
    assert "inline-secret" not in json.dumps(cfg.public_dict())
    assert "inline-secret" not in repr(cfg)
    assert (
        parse_models_config({"judge": {"base_url": "http://x", "model": "j"}})
        .role("judge")
        .resolved_api_key()
        is None
    )
    assert role(seed=None).request_seed(5) is None and role(seed=10).request_seed(5) == 15
