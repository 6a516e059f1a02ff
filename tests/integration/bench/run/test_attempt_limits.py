"""Whose loss it is, on real containers: an attempt whose own allowed calls drive its
tool server over its memory limit is the agent's failure (signature `resource_limit`),
never a system error; a container killed from outside mid-attempt stays a system error.

Both drive the one attempt lifecycle (bench.run.lifecycle.open_attempt) that tbx run,
env serve and the Session API share, with calls over MCP through the tool proxy.
The containers get a small memory limit so the tool server's limit is reached in a
few seconds of calls, each within the proxy's per-call argument cap.
"""

from __future__ import annotations

import asyncio
from typing import Any

import docker
import pytest
from pg_support import DEMO_PACK
from sandbox_containers import started_provider

from bench.dataset import load_benchmark
from bench.run.attempt import AttemptOutcome, attempt_spec
from bench.run.grading import grade
from bench.run.lifecycle import open_attempt
from judge import GoldenState, state_hash
from sandbox import MAX_ARGUMENT_BYTES, Limits, ProxyServer, SandboxGoneError, leftovers, new_id, proxy_client

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
SERVER = "server-retail"
LIMITS = Limits(memory="160m")  # every container of the set; the server's own load passes it first
DESCRIPTION = "d" * (MAX_ARGUMENT_BYTES - 1024)  # allowed: under the per-call argument cap


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def _create(client: Any, i: int) -> Any:
    item = {
        "subject": f"load {i}",
        "description": DESCRIPTION,
        "status": "open",
        "requester_id": "CUS-30000001",
    }
    return await client.call_tool("zendesk_create_item", {"table": "tickets", "item": item})


async def _read_all(client: Any) -> Any:
    return await client.call_tool("zendesk_get_items", {"table": "tickets", "$top": 1000})


def _run(body: Any) -> tuple[AttemptOutcome, BaseException | None, Any]:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    run_id = new_id("run-it-limits")

    async def go() -> tuple[AttemptOutcome, BaseException | None, Any]:
        seen: Any = None
        try:
            async with started_provider(run_id, warm=0) as provider:
                spec = attempt_spec(
                    bench,
                    task,
                    0,
                    run_id=run_id,
                    attempt_id=new_id("att-lim"),
                    agent="noop",
                    images=provider.images,
                    limits=LIMITS,
                )
                outcome = AttemptOutcome.of(spec)
                with ProxyServer() as proxy:
                    try:
                        async with (
                            open_attempt(spec, provider, proxy, outcome=outcome) as live,
                            proxy_client(live.registration) as client,
                        ):
                            seen = await body(live, client, proxy)
                    except Exception as exc:
                        return outcome, exc, seen
                return outcome, None, seen
        finally:
            assert leftovers(run_id) == ([], [])

    return asyncio.run(go())


def test_its_own_calls_over_the_servers_memory_limit_are_a_failure_not_a_system_error(
    base_images: dict[str, str],
) -> None:
    async def body(live: Any, client: Any, proxy: ProxyServer) -> dict[str, Any]:
        for batch in range(12):  # 180 tickets of ~63 KiB: ~11 MB the server reads back per list
            await asyncio.gather(*(_create(client, batch * 15 + i) for i in range(15)))
        for _ in range(5):
            if proxy.loss(live.token) is not None:
                break
            await asyncio.gather(*(_read_all(client) for _ in range(15)), return_exceptions=True)
        await asyncio.sleep(0)
        after = await live.loss(wait=True)
        later = await client.call_tool("zendesk_get_items", {"table": "tickets", "$top": 1})
        return {"loss": after, "later": later}

    outcome, error, seen = _run(body)
    assert error is None, repr(error)  # not SandboxGoneError: nothing for a retry to cure
    loss = seen["loss"]
    assert loss is not None and loss.agent_load, loss
    assert f"its {SERVER} container" in loss.cause and "hit its memory limit of 160 MiB" in loss.cause
    later = seen["later"]
    assert (
        later.is_error
        and "this attempt's own tool calls drove its sandbox over a resource limit" in _text(later)
    )
    assert outcome.resource_limit == loss.cause
    assert outcome.terminal_state is not None  # PostgreSQL lived: the state is read, and graded beside
    assert outcome.initial_state is not None
    initial = outcome.initial_state
    nothing = GoldenState(
        task_id=TASK,
        key="none",
        initial_state=initial,
        final_state=initial,
        initial_hash=state_hash(initial),
        golden_hash=state_hash(initial),
    )
    bench = load_benchmark(DEMO_PACK)
    graded = asyncio.run(
        grade(
            bench,
            bench.task(TASK),
            nothing,
            outcome.terminal_state,
            outcome.calls,
            initial=initial,
            final_message="",
            skip_rubrics=True,
            resource_limit=outcome.resource_limit,
        )
    )
    assert not graded.verdict.passed and graded.verdict.signature == "resource_limit"
    assert graded.verdict.differences  # the 180 tickets, labelled beside the signature


def test_a_container_killed_from_outside_mid_attempt_is_still_a_system_error(
    base_images: dict[str, str],
) -> None:
    async def body(live: Any, client: Any, proxy: ProxyServer) -> None:
        await _create(client, 0)
        cid = live.lease.containers[SERVER]
        reads = [asyncio.ensure_future(_read_all(client)) for _ in range(3)]  # in flight at the kill
        await asyncio.to_thread(docker.from_env().containers.get(cid).kill)
        await asyncio.gather(*reads, return_exceptions=True)
        await live.loss(wait=True)

    outcome, error, _ = _run(body)
    assert isinstance(error, SandboxGoneError), repr(error)
    assert f"its {SERVER} container" in str(error) and "exited with code 137 (killed: SIGKILL)" in str(error)
    assert outcome.resource_limit is None
