"""A checkout's own tool server in an attempt's set (Docker): the airline server of a
user's thinkingbox-data checkout, built into its image and booted once for the module,
behind the tool proxy as a native domain's server. Checks what a client sees (the
scenario's tools only: no reserved tool, no configure_data), the init at boot, the
effects in the server's own key order after a write, a world state the server refuses,
a server that dies mid-attempt (its container ends, naming it), and that nothing is left."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest

from bench.dataset import Benchmark, Task, load_benchmark
from bench.prepare import checkout_servers
from bench.run.attempt import task_tool_policy
from sandbox import (
    AsyncSandbox,
    CheckoutServerError,
    ProxyServer,
    Sandbox,
    SandboxRequest,
    docker_client,
    leftovers,
    proxy_client,
    register_request,
    server_effects,
    sweep,
)
from sandbox.checkout_server import init_server
from sandbox.host_firewall import bridge_name

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[3]
CHECKOUT = Path(os.environ.get("TBX_CHECKOUT", REPO.parent / "shared/benchmarks/thinkingbox-data"))
AIRLINE_RELEASE = "dataset_2604_airline_tau_bench"
SERVER = "airline_tau_bench"


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.fixture(scope="module")
def bench() -> Benchmark:
    if not (CHECKOUT / "servers" / "thinkingbox_tools").is_dir():
        pytest.skip(f"no thinkingbox-data checkout with its servers at {CHECKOUT} (set TBX_CHECKOUT)")
    return load_benchmark(CHECKOUT, release=AIRLINE_RELEASE)


@pytest.fixture(scope="module")
def airline(bench: Benchmark) -> Iterator[tuple[Task, Sandbox]]:
    task = bench.tasks[0]
    run_id = f"test-checkout-{uuid.uuid4().hex[:8]}"
    sb = Sandbox(
        SandboxRequest(checkout_servers=checkout_servers(bench, task), typesense=False, run_id=run_id)
    )
    try:
        sb.start()
        yield task, sb
    finally:
        sb.close()
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])


async def test_an_airline_set_behind_the_tool_proxy(bench: Benchmark, airline: tuple[Task, Sandbox]) -> None:
    task, sb = airline
    handle = sb.handle
    assert handle is not None and bench.on_checkout_servers(task) and task.domain == SERVER
    assert handle.checkout_servers == [SERVER] and handle.init_results == {SERVER: {}}
    listed = [t["name"] for t in handle.tools[SERVER]]
    assert "configure_data" in listed and not any(n.startswith("__reserved__") for n in listed)

    scenario = bench.scenario_of(task)
    with ProxyServer() as proxy:
        reg = proxy.register(
            register_request(AsyncSandbox.adopt(sb), sb.attempt_id, task_tool_policy(bench, task))
        )
        async with proxy_client(reg) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            assert sorted(tools) == sorted(scenario.tool_names) and "configure_data" not in tools
            for hidden in ("configure_data", "__reserved__init", "__reserved__geteffects"):
                refused = await client.call_tool(hidden, {})
                assert refused.is_error, hidden
            user = json.loads(_text(await client.call_tool("get_user_details", {"user_id": "mia_li_3668"})))
            assert user["status"] == "ok"
            first = next(
                iter(json.loads((CHECKOUT / "support/tau_bench/airline_data/reservations.json").read_text()))
            )
            cancelled = json.loads(
                _text(
                    await client.call_tool(
                        "cancel_reservation", {"reservation_id": first, "reason": "change_of_plan"}
                    )
                )
            )
            assert cancelled["status"] == "cancelled"
        proxy.unregister(reg.token)

    interface = bridge_name(sb.attempt_id)
    t = time.monotonic()
    effects = server_effects(handle.checkout_servers, handle.servers, handle.upstream_secret, interface)
    fetched = time.monotonic() - t
    assert list(effects) == [SERVER] and list(effects[SERVER]) == ["reservations", "users"]
    reservations = effects[SERVER]["reservations"]
    assert next(iter(reservations)) == first and reservations[first]["status"] == "cancelled"
    assert len(reservations) == 2000 and len(effects[SERVER]["users"]) == 500
    print(f"effects fetched in {fetched:.2f}s")

    # a world state the server refuses is a clear error naming it and quoting its answer
    server = sb.request.checkout_servers[0].model_copy(update={"world_state": {"flights": {}}})
    with pytest.raises(
        CheckoutServerError, match=r"checkout server airline_tau_bench: __reserved__init refused"
    ):
        init_server(server, handle.servers[SERVER], handle.upstream_secret, interface)

    # a server that dies mid-attempt: its container ends with it, naming it
    container = docker_client().containers.get(handle.containers[f"server-{SERVER}"])
    kill = (
        "import os\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit() and b'thinkingbox_tools' in open(f'/proc/{p}/cmdline', 'rb').read():\n"
        "        os.kill(int(p), 9)\n"
    )
    container.exec_run(["python", "-c", kill])
    assert container.wait(timeout=30)["StatusCode"] == 137
    assert f"checkout server {SERVER} exited while serving" in container.logs().decode()
