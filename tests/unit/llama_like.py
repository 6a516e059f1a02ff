"""A stub model server on 127.0.0.1 that behaves as the real servers issue 43 met do
(llama-cpp-python 0.3 with `--chat_format chatml-function-calling`, vLLM, llama.cpp),
each behaviour switchable, for tbx's endpoint-compatibility tests:

- one request at a time (a lock, as llama-cpp-python's single model): `GET /models`
  waits for the completion in progress; `slow` seconds per completion;
- `GET /models` lists the model file's path, owned_by "me", with a `Server` header;
- a message whose `content` is null is refused with HTTP 500 and a pydantic error body;
- `tools` are ignored unless the request carries `tool_choice` (answered with plain text);
- a prompt over `context_chars` is refused with 400 `context_length_exceeded`;
- `key`: a key it wants (401 without it); `fail_500`: transient 500s to answer first.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_PATH = "/models/gemma-3-270m-it-Q4_K_M.gguf"
NULL_CONTENT_500 = {
    "error": {
        "message": "[{'type': 'string_type', 'loc': ('body', 'messages', 2, 'typed-dict', 'content', 'str'), "
        "'msg': 'Input should be a valid string', 'input': None}]",
        "type": "internal_server_error",
    }
}


class LlamaLike:
    def __init__(self, *, slow: float = 0.0, context_chars: int = 1_000_000, key: str | None = None) -> None:
        self.slow = slow
        self.context_chars = context_chars
        self.key = key
        self.fail_500: list[str] = []  # bodies of transient 500s to answer first, in order
        self.tool_call: dict[str, Any] | None = None  # the tool call to make when tools are honoured
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.models_answered_at: list[float] = []
        self._one_at_a_time = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def version_string(self) -> str:
                return "uvicorn"

            def _authorized(self) -> bool:
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                if outer.key is None or self.headers.get("Authorization") == f"Bearer {outer.key}":
                    return True
                self._send(401, {"error": {"message": "Invalid API key", "type": "invalid_request_error"}})
                return False

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                with outer._one_at_a_time:
                    outer.models_answered_at.append(time.monotonic())
                    self._send(
                        200,
                        {"object": "list", "data": [{"id": MODEL_PATH, "object": "model", "owned_by": "me"}]},
                    )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not self._authorized():
                    return
                with outer._one_at_a_time:
                    outer.requests.append(body)
                    time.sleep(outer.slow)
                    self._send(*outer.answer(body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up waiting (a probe's timeout) is part of the behaviour

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.fail_500:
            return 500, {"error": {"message": self.fail_500.pop(0)}}
        for m in body["messages"]:
            if m.get("content") is None:
                return 500, NULL_CONTENT_500
        prompt = sum(len(json.dumps(m)) for m in body["messages"]) + len(json.dumps(body.get("tools", [])))
        if prompt > self.context_chars:
            return 400, {
                "error": {
                    "message": f"This model's maximum context length is {self.context_chars} tokens. "
                    f"However, you requested {prompt} tokens. Please reduce the length of the messages.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            }
        message: dict[str, Any] = {"role": "assistant", "content": "I can help with that."}
        honoured = body.get("tools") and body.get("tool_choice") not in (None, "none")
        if honoured and self.tool_call is not None and body["messages"][-1]["role"] != "tool":
            message = {"role": "assistant", "content": None, "tool_calls": [self.tool_call]}
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL_PATH,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt // 4, "completion_tokens": 5, "total_tokens": prompt // 4 + 5},
        }

    def start(self) -> LlamaLike:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
