"""OpenEnv's Task API over the served list (bench.env.task_api), the session registry
(bench.env.sessions) and the MCP JSON-RPC dispatch (bench.env.mcp_rpc) against a
stand-in episode (the real one is driven in tests/integration/bench/env/test_env_server.py (its openenv 0.10 client))."""

from __future__ import annotations

from typing import Any

import pytest

from bench.dataset import Task
from bench.env.mcp_rpc import McpEndpoint, RpcCode
from bench.env.protocol import CallToolAction, EnvError, ErrorCode, ListToolsAction, Observation
from bench.env.sessions import Sessions
from bench.env.task_api import ENV_NAME, TaskApi


def _task(i: int) -> Task:
    return Task(
        id=f"f{i}.py:test_case_{i}",
        file=f"f{i}.py",
        uid=f"test_case_{i}",
        source="s",
        scenario="sc",
        domain="retail",
        query="SECRET QUERY",
        user_context="PRIVATE CONTEXT",
    )


def test_task_api_lists_names_only() -> None:
    api = TaskApi([_task(i) for i in range(5)])
    listed = api.list_tasks({"split": "test"})
    assert listed["env_name"] == ENV_NAME and [t["index"] for t in listed["tasks"]] == [0, 1, 2, 3, 4]
    assert "SECRET" not in str(listed) and "PRIVATE" not in str(listed)
    assert api.num_tasks({"split": "test"}) == {"num_tasks": 5}
    assert api.task({"split": "test", "index": 2})["task"]["test_uid"] == "f2.py:test_case_2"
    assert api.task({"split": "test", "index": -1})["task"]["index"] == 4
    assert [t["index"] for t in api.task_range({"split": "test", "start": 1, "stop": 3})["tasks"]] == [1, 2]
    assert [t["index"] for t in api.task_range({"split": "test"})["tasks"]] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("call", "data", "status", "text"),
    [
        ("task", {"split": "test", "index": 5}, 400, "Invalid task index 5"),
        ("task", {"split": "test", "index": 10**30}, 422, "index"),
        ("task", {"split": "test"}, 422, "index"),
        ("num_tasks", {"split": "train"}, 404, "unknown split 'train'"),
        ("num_tasks", [], 422, "invalid request"),
        ("list_tasks", {"split": "test", "x": 1}, 422, "x"),
    ],
)
def test_task_api_bad_requests(call: str, data: Any, status: int, text: str) -> None:
    api = TaskApi([_task(i) for i in range(5)])
    with pytest.raises(EnvError) as err:
        getattr(api, call)(data)
    assert err.value.status == status and text in err.value.message


def test_unknown_environment_is_404() -> None:
    with pytest.raises(EnvError) as err:
        TaskApi.check_env("other")
    assert err.value.status == 404
    TaskApi.check_env(ENV_NAME.upper())


def test_sessions_are_server_named_bounded_and_attached_once() -> None:
    sessions = Sessions(per_client=2, idle_timeout=300)
    a, b = sessions.create("loopback"), sessions.create("loopback")
    assert a.id != b.id and len(a.id) == 32
    with pytest.raises(EnvError) as err:
        sessions.create("loopback")
    assert err.value.code == ErrorCode.CAPACITY_REACHED
    sessions.attach(a.id)
    with pytest.raises(EnvError, match="already has an attached WebSocket"):
        sessions.attach(a.id)
    with pytest.raises(EnvError, match="Unknown session_id"):
        sessions.get("nope")


def test_idle_sessions_without_an_episode_are_dropped() -> None:
    sessions = Sessions(per_client=1, idle_timeout=0.0)
    first = sessions.create("loopback")
    second = sessions.create("loopback")  # the first idled out (timeout 0) and made room
    assert second.id != first.id and len(sessions) == 1


class StandIn:
    """The two episode calls the MCP endpoint makes."""

    def __init__(self) -> None:
        self.actions: list[Any] = []
        self.done = False

    async def step(self, action: Any) -> Observation:
        self.actions.append(action)
        if isinstance(action, ListToolsAction):
            tool = {
                "type": "function",
                "function": {"name": "get_order", "description": "d", "parameters": {"type": "object"}},
            }
            return Observation.build("tools", tools=[tool])
        assert isinstance(action, CallToolAction)
        return Observation.build("tool", tool_name=action.tool_name, tool_result='{"ok": 1}', call_id="c")

    async def close(self, reason: str) -> None:
        self.done = True


async def test_mcp_reaches_the_sessions_episode() -> None:
    sessions = Sessions(per_client=4, idle_timeout=300)
    mcp = McpEndpoint(
        sessions, lambda eid: (_ for _ in ()).throw(EnvError(ErrorCode.SESSION_ERROR, "x", 404))
    )
    created = await mcp.handle(
        {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}, client="loopback"
    )
    sid = created["result"]["session_id"]
    early = await mcp.handle(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"session_id": sid}}, client="loopback"
    )
    assert early["error"]["code"] == RpcCode.INVALID_REQUEST and "reset" in early["error"]["message"]
    episode = StandIn()
    sessions.get(sid).episode = episode  # type: ignore[assignment]
    listed = await mcp.handle(
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"session_id": sid}}, client="loopback"
    )
    assert listed == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"tools": [{"name": "get_order", "description": "d", "inputSchema": {"type": "object"}}]},
    }
    call = {"name": "get_order", "arguments": {"order_id": "1"}, "session_id": sid}
    called = await mcp.handle(
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call}, client="loopback"
    )
    assert called["result"]["data"] == '{"ok": 1}' and called["result"]["isError"] is False
    assert episode.actions[-1].arguments == {"order_id": "1"}
    reserved = await mcp.handle(
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "reset", "session_id": sid}},
        client="loopback",
    )
    assert reserved["error"]["code"] == RpcCode.INVALID_PARAMS and "reserved" in reserved["error"]["message"]
    closed = await mcp.handle(
        {"jsonrpc": "2.0", "id": 6, "method": "openenv/session/close", "params": {"session_id": sid}},
        client="loopback",
    )
    assert closed["result"] == {"session_id": sid, "closed": True} and episode.done


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ([1, 2], RpcCode.INVALID_REQUEST),
        ({"method": "tools/list"}, RpcCode.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "method": "nope"}, RpcCode.METHOD_NOT_FOUND),
        ({"jsonrpc": "2.0", "method": "tools/list", "params": [1]}, RpcCode.INVALID_PARAMS),
        ({"jsonrpc": "2.0", "method": "tools/list", "params": {"session_id": "zz"}}, RpcCode.INVALID_PARAMS),
        ({"jsonrpc": "2.0", "method": "tools/call", "params": {}}, RpcCode.INVALID_PARAMS),
    ],
)
async def test_mcp_bad_requests_get_json_rpc_errors(payload: Any, code: RpcCode) -> None:
    mcp = McpEndpoint(Sessions(per_client=4, idle_timeout=300), lambda eid: None)  # type: ignore[arg-type,return-value]
    answer = await mcp.handle(payload, client="loopback")
    assert answer["error"]["code"] == code and answer["jsonrpc"] == "2.0"
