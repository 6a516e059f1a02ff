"""Fakes for the agent loop's tests (bench.rollout): a small real key-value MCP server
on 127.0.0.1 (`FakeMcp`), a scripted agent policy (`Steps` of `say` / `call`), the
loop's spec, and scripted chat completions behind an `LLMClient` (`ModelScript`,
`model_client`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import httpx2
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings

from bench.llm.client import LLMClient, ToolCallRequest
from bench.llm.config import RoleConfig
from bench.rollout.agents import AgentStep
from bench.rollout.conversation import LoopSpec

SET_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"key": {"type": "string", "description": "which"}, "value": {}},
    "required": ["key", "value"],
    "additionalProperties": False,
}


class FakeMcp:
    """A key-value MCP server: get_value (read), set_value (write), slow (sleeps); with
    `delete`, also delete_value (a destructive write, for the approval harness)."""

    def __init__(self, *, delete: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[dict[str, str]] = []
        self.store: dict[str, Any] = {}
        tools = [
            types.Tool(
                name="get_value",
                description="Read a value.",
                input_schema={
                    "type": "object",
                    "properties": {"key": {"type": "string"}},
                    "required": ["key"],
                },
            ),
            types.Tool(name="set_value", description="Write a value.", input_schema=SET_SCHEMA),
            types.Tool(name="slow", description=None, input_schema={"type": "object"}),
        ]
        if delete:
            tools.append(
                types.Tool(
                    name="delete_value",
                    description="Remove a value for good.",
                    input_schema={
                        "type": "object",
                        "properties": {"key": {"type": "string"}},
                        "required": ["key"],
                    },
                )
            )

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            args = dict(params.arguments or {})
            self.calls.append((params.name, args))
            error = False
            if params.name == "get_value":
                text = json.dumps({"value": self.store.get(str(args.get("key")))})
            elif params.name == "set_value":
                if set(args) != {"key", "value"}:
                    text = json.dumps({"error": "Input validation failed", "tool": "set_value"})
                else:
                    self.store[args["key"]] = args["value"]
                    text = json.dumps({"ok": True})
            elif params.name == "delete_value" and delete:
                text = json.dumps({"deleted": self.store.pop(str(args.get("key")), None) is not None})
            elif params.name == "slow":
                await anyio.sleep(float(args.get("seconds", 1)))
                text = "slept"
            else:
                text, error = f"Unknown tool: '{params.name}'", True
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)

        server = Server("fake", version="t", on_list_tools=list_tools, on_call_tool=call_tool)
        app = server.streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
            await app(scope, receive, send)

        self.server = uvicorn.Server(
            uvicorn.Config(
                recording, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""

    def start(self) -> FakeMcp:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "fake MCP server did not start"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def reset(self) -> None:
        self.calls.clear()
        self.headers.clear()
        self.store.clear()


def spec(**kw: Any) -> LoopSpec:
    return LoopSpec(task_id="t:1", agent="test", query="please help", **kw)


class Steps:
    """An agent policy answering from a list of AgentStep (then nothing)."""

    def __init__(self, steps: Sequence[AgentStep]):
        self.steps = list(steps)
        self.seen: list[list[dict[str, Any]]] = []
        self.tools: Sequence[dict[str, Any]] = []

    async def step(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> AgentStep:
        self.seen.append(list(messages))
        self.tools = tools
        return self.steps.pop(0) if self.steps else AgentStep(content="still here?")


def say(text: str) -> AgentStep:
    return AgentStep(content=text)


def call(name: str, args: dict[str, Any] | str, cid: str = "") -> AgentStep:
    raw = args if isinstance(args, str) else json.dumps(args)
    return AgentStep(tool_calls=[ToolCallRequest(id=cid or f"id-{name}", name=name, arguments=raw)])


class ModelScript:
    """Scripted chat completions for two models: 'agent-m' and 'user-m'."""

    def __init__(self, agent: list[dict[str, Any]], user: list[str]):
        self.agent = list(agent)
        self.user = list(user)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if body["model"] == "agent-m":
            msg = self.agent.pop(0)
        else:
            msg = {"role": "assistant", "content": self.user.pop(0)}
            usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
        return httpx2.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": msg}],
                "usage": usage,
            },
        )


def model_client(script: ModelScript, model: str, role: str) -> LLMClient:
    cfg = RoleConfig(base_url="http://model.test/v1", model=model, api_key="k")
    return LLMClient(cfg, role=role, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(script)))
