"""A checkout that gives up waiting for a sandbox (`sandbox.CheckoutTimeout`, raised by
`DockerProvider` when its warm pool hands none over within its `timeouts.checkout`) is a
server at capacity, not a failed attempt: `tbx env serve` refuses the reset with
CAPACITY_REACHED and a `retry_after` (nothing recorded, the repeat free again), the
Session API refuses the create as its admission does (429, Retry-After), and `tbx run`
tries the attempt again (a retryable system error)."""

from __future__ import annotations

import asyncio
import json
import pickle
from pathlib import Path
from typing import Any, cast

import pytest
from attempt_fakes import TASK

from bench.dataset import Benchmark
from bench.defaults import RETRY_AFTER
from bench.env.host import EnvHost, EnvOptions
from bench.env.protocol import EnvError, ErrorCode
from bench.env.server import EnvServer
from bench.llm.config import parse_models_config
from bench.run.attempt import attempt_spec
from bench.run.causes import fault_of
from bench.session_api.admission import AtCapacity
from bench.session_api.app import _handled
from bench.session_api.models import CreateBody
from bench.session_api.sessions import Session
from sandbox import (
    SANDBOX_TIMEOUTS,
    CheckoutTimeout,
    DockerProvider,
    ProxyServer,
    SandboxLease,
    SandboxProvider,
    SandboxRequest,
)


class NoSandboxComes(SandboxProvider):
    """Every checkout waits in vain: the provider's wait ends in CheckoutTimeout."""

    def __init__(self) -> None:
        super().__init__()
        self.checkouts = 0

    async def checkout(self, request: SandboxRequest) -> SandboxLease:
        self.checkouts += 1
        raise CheckoutTimeout(f"no {request.domains[0]} sandbox within 240 s", 240.0)

    async def boot(self, request: SandboxRequest) -> Any:
        raise AssertionError("not booted: the checkout gave up first")

    async def prepare(self, booted: Any, request: SandboxRequest) -> SandboxLease:
        raise AssertionError("not prepared: the checkout gave up first")


class NeverAsked:
    """The golden store: the episode starts its replay; a refused reset cancels it."""

    async def get(self, task: Any) -> Any:
        await asyncio.Event().wait()


def _host(pack: Benchmark, out: Path, provider: SandboxProvider) -> EnvHost:
    config = parse_models_config({"user": {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}})
    host = EnvHost(pack, config, [pack.task(TASK)], EnvOptions(out=out, skip_rubrics=True))
    host.provider = provider  # type: ignore[assignment]  # the fake in place of the DockerProvider
    host.proxy = cast(ProxyServer, object())  # never reached: no sandbox, no registration
    host.golden = NeverAsked()  # type: ignore[assignment]
    host.bring_up_error = None  # started
    return host


def test_the_error_is_a_retryable_system_error_that_survives_pickling() -> None:
    exc = CheckoutTimeout("no retail sandbox within 240 s", 240.0)
    fault = fault_of(exc)
    assert fault.retryable and fault.cause == "other"  # as the SandboxError it was before
    back = pickle.loads(pickle.dumps(exc))  # a Ray node's error comes back pickled
    assert isinstance(back, CheckoutTimeout) and back.waited == 240.0 and str(back) == str(exc)


def test_the_docker_provider_gives_up_waiting_with_it() -> None:
    class Stuck:
        async def acquire(self, prepare: Any) -> Any:
            await asyncio.Event().wait()  # every spare taken, no boot finishes

    provider = DockerProvider(warm=1, timeouts=SANDBOX_TIMEOUTS.model_copy(update={"checkout": 0.2}))

    async def warm_up(request: SandboxRequest) -> Any:
        return Stuck()

    provider.warm_up = warm_up  # type: ignore[method-assign]
    with pytest.raises(CheckoutTimeout) as gave_up:
        asyncio.run(provider.checkout(SandboxRequest(domains=["retail"])))
    assert gave_up.value.waited == 0.2 and "no retail sandbox within 0.2 s" in str(gave_up.value)
    assert provider.alive == 0  # no slot held for a checkout that got nothing


def test_env_serve_refuses_the_reset_and_gives_the_repeat_back(pack: Benchmark, tmp_path: Path) -> None:
    provider = NoSandboxComes()
    host = _host(pack, tmp_path / "out", provider)
    server = EnvServer(host)

    async def resets() -> list[EnvError]:
        refused = []
        # the next unused repeat (0), then repeat 0 by name: given back, so not "recorded or
        # running"; an episode id the client chose is free again too (not "exists")
        for data in (
            {"test_uid": TASK, "episode_id": "ep-mine"},
            {"test_uid": TASK, "repeat": 0, "episode_id": "ep-mine"},
        ):
            with pytest.raises(EnvError) as exc:
                await server.reset(data)
            refused.append(exc.value)
        return refused

    refusals = asyncio.run(resets())
    assert provider.checkouts == 2  # each reset tried (and waited) for a sandbox
    for refusal in refusals:
        assert refusal.code == ErrorCode.CAPACITY_REACHED and refusal.status == 503
        assert refusal.extra == {"retry_after": RETRY_AFTER}
        assert refusal.message.startswith("Server at capacity: no retail sandbox came free within 240 s")
    assert host.episodes == {}  # no slot held
    assert host.next_repeat(pack.task(TASK), None) == 0  # never recorded as an attempt
    out = tmp_path / "out"
    for name in ("results.jsonl", "errors.jsonl"):
        assert not (out / name).exists() or (out / name).read_text() == ""
    # HTTP's answer carries the retry in its header too.
    response = server._error(refusals[0])
    assert response.status_code == 503 and response.headers["retry-after"] == str(RETRY_AFTER)
    assert json.loads(response.body)["retry_after"] == RETRY_AFTER


def test_the_session_api_refuses_the_create_as_admission_does(pack: Benchmark) -> None:
    spec = attempt_spec(pack, pack.task(TASK), 0, run_id="run-x", attempt_id="sess-x", agent="oracle")
    session = Session("s", CreateBody(session_id="s", server_config={}, available_tools=[]))

    async def create(request: Any) -> Any:
        await session.open(spec, NoSandboxComes(), cast(ProxyServer, object()))

    with pytest.raises(AtCapacity) as refused:
        asyncio.run(create(None))
    assert refused.value.status == 429 and refused.value.retry_after == RETRY_AFTER
    assert refused.value.message.startswith("Server at capacity: no retail sandbox within 240 s")
    # The routes' wrapper answers it as admission's refusals: 429 with Retry-After.
    response = asyncio.run(_handled(create)(cast(Any, None)))
    assert response.status_code == 429 and response.headers["retry-after"] == str(RETRY_AFTER)
    body = json.loads(response.body)
    assert body["success"] is False and body["content"]["value"].startswith("Server at capacity")
