"""A recording relay in front of a real model server, for benchmarks/local_model.py.

It listens on 127.0.0.1 and forwards every request, unchanged but for the
`model` field when `rename` maps it, to the server, and keeps what crossed it
per request: the role (from the model name the client sent), the status and
the time waited, whether the request offered tools and sent `tool_choice`,
whether an assistant message carried `content: null`, the number of system
messages, whether an `Authorization` header came, and from the server's reply
its `usage` and `finish_reason`, or the error body. That is the server's own
view of a run, to hold tbx's rows and report against.

    relay = Relay("http://127.0.0.1:8011").start()   # relay.base_url -> http://127.0.0.1:PORT/v1
    ...
    relay.records                                      # list[Exchange]
    relay.close()
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import httpx
import uvicorn
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HOP_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding", "accept-encoding"})


class Exchange(BaseModel):
    """One request through the relay and what the server answered."""

    started: float  # time.time()
    seconds: float = 0.0
    method: str
    path: str
    role: str | None = None  # the model name the client sent (the config's per-role name)
    status: int | None = None
    authorization: bool = False
    tools: int = 0
    tool_choice: Any = None
    null_content: int = 0  # assistant messages with tool calls and content null
    system_messages: int = 0
    messages: int = 0
    body_sha: str | None = None  # the request body, to see an identical re-ask
    temperature: Any = None
    seed: Any = None
    usage: dict[str, Any] = Field(default_factory=dict)
    finish_reason: str | None = None
    tool_calls: int = 0
    content: str | None = None  # the reply's text, cut
    error: str | None = None  # the error body, cut, or the relay's own failure


def _summary(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    return {
        "role": body.get("model"),
        "tools": len(body.get("tools") or []),
        "tool_choice": body.get("tool_choice"),
        "null_content": sum(
            1
            for m in messages
            if m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") is None
        ),
        "system_messages": sum(1 for m in messages if m.get("role") == "system"),
        "messages": len(messages),
        "temperature": body.get("temperature"),
        "seed": body.get("seed"),
    }


class Relay:
    def __init__(self, upstream: str, rename: dict[str, str] | None = None, timeout: float = 3600.0):
        self.upstream = upstream.rstrip("/")
        self.rename = dict(rename or {})
        self.timeout = timeout
        self.records: list[Exchange] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _forward(self, request: Request) -> Response:
        raw = await request.body()
        rec = Exchange(
            started=time.time(),
            method=request.method,
            path=request.url.path,
            authorization="authorization" in request.headers,
        )
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict):
                rec = rec.model_copy(update=_summary(body))
                rec.body_sha = hashlib.sha256(raw).hexdigest()[:16]
                if body.get("model") in self.rename:
                    body["model"] = self.rename[body["model"]]
                    raw = json.dumps(body).encode()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        t0 = time.perf_counter()
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                resp = await client.request(
                    request.method, self.upstream + request.url.path, content=raw, headers=headers
                )
        except httpx.HTTPError as exc:
            rec.seconds = time.perf_counter() - t0
            rec.error = f"relay: {exc.__class__.__name__}: {exc}"
            self._keep(rec)
            return Response(status_code=502, content=rec.error)
        rec.seconds = time.perf_counter() - t0
        rec.status = resp.status_code
        self._read_reply(rec, resp)
        self._keep(rec)
        keep = {k: v for k, v in resp.headers.items() if k.lower() not in HOP_HEADERS | {"content-encoding"}}
        return Response(status_code=resp.status_code, content=resp.content, headers=keep)

    @staticmethod
    def _read_reply(rec: Exchange, resp: httpx.Response) -> None:
        if resp.status_code != 200:
            rec.error = resp.text[:500]
            return
        try:
            data = resp.json()
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        rec.usage = dict(data.get("usage") or {})
        choices = data.get("choices") or []
        if choices and isinstance(choices[0], dict):
            rec.finish_reason = choices[0].get("finish_reason")
            msg = choices[0].get("message") or {}
            rec.tool_calls = len(msg.get("tool_calls") or [])
            text = msg.get("content")
            rec.content = text[:300] if isinstance(text, str) else None

    def _keep(self, rec: Exchange) -> None:
        with self._lock:
            self.records.append(rec)

    def since(self, t: float) -> list[Exchange]:
        with self._lock:
            return [r for r in self.records if r.started >= t]

    def start(self) -> Relay:
        app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not (self._server.started and self._server.servers):
            if time.monotonic() > deadline:
                raise RuntimeError("model relay did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
