"""A stand-in model for density benchmarks: an OpenAI-compatible chat-completions
endpoint on 127.0.0.1 that answers every completion after a fixed delay.

As the *agent* it plays the task's golden calls as tool calls, one per
completion (the task is recognised by its query, the first user message), then
a final message ending in the done tag. As the *user* (a request whose model is
the user model) it answers with the stop token at once. It never sees golden
state: only the golden call list the oracle agent also plays.

    stub = StubModel(bench, delay=3.0).start()   # stub.base_url -> http://127.0.0.1:PORT/v1
    ...
    stub.close()
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.dataset import Benchmark
from bench.rollout.agents import DONE_TAG

AGENT_MODEL = "stub-agent"
USER_MODEL = "stub-user"
USER_STOP = "###STOP###"


def _completion(model: str, message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


class StubModel:
    def __init__(self, bench: Benchmark, delay: float = 3.0):
        self.delay = delay
        self.calls_by_query: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for t in bench.tasks:
            golden = bench.effective_init(t).golden_tool_interactions
            self.calls_by_query[t.query] = [(c.tool, dict(c.parameters)) for c in golden if c.tool]
        self.completions = 0
        self.unknown = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(self.delay)
        self.completions += 1
        model = body.get("model", AGENT_MODEL)
        messages = body.get("messages", [])
        if model == USER_MODEL:
            return JSONResponse(_completion(model, {"role": "assistant", "content": USER_STOP}, "stop"))
        query = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        calls = self.calls_by_query.get(query or "")
        if calls is None:
            self.unknown += 1
            calls = []
        done = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
        if done < len(calls):
            name, args = calls[done]
            call = {
                "id": f"call_{done}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            msg = {"role": "assistant", "content": None, "tool_calls": [call]}
            return JSONResponse(_completion(model, msg, "tool_calls"))
        return JSONResponse(
            _completion(model, {"role": "assistant", "content": f"All done. {DONE_TAG}"}, "stop")
        )

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": AGENT_MODEL}, {"id": USER_MODEL}]})

    def start(self) -> StubModel:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models),
            ]
        )
        # host+port=0 (not pre-bound sockets): accepted sockets then get TCP_NODELAY (docs/performance.md).
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not (self._server.started and self._server.servers):
            if time.monotonic() > deadline:
                raise RuntimeError("stub model did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
