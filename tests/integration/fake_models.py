"""A scripted model for the agent's integration tests: a tiny OpenAI-compatible
chat-completions server on 127.0.0.1 (`FakeModels`) and the assistant messages that
make each of a list of tool calls (`tool_call_msgs`)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.llm.config import ModelsConfig, parse_models_config


class FakeModels:
    """A tiny OpenAI-compatible chat-completions server on 127.0.0.1 (ephemeral port)
    answering each model from its own list of scripted assistant messages."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                script = outer.scripts.get(body.get("model"), [])
                if not self.path.endswith("/chat/completions") or not script:
                    self._send(404, {"error": {"message": f"nothing scripted for {body.get('model')}"}})
                    return
                msg = script.pop(0)
                self._send(
                    200,
                    {
                        "id": f"cmpl-{len(outer.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": msg,
                                "finish_reason": "tool_calls" if msg.get("tool_calls") else "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": 1000,
                            "completion_tokens": 20,
                            "total_tokens": 1020,
                            "prompt_tokens_details": {"cached_tokens": 400},
                        },
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def config(self) -> ModelsConfig:
        return parse_models_config(
            {
                "defaults": {"base_url": self.base_url, "api_key": "test-key", "max_retries": 0},
                "agent": {"model": "agent-m", "seed": 100},
                "user": {"model": "user-m"},
                "prices": {"agent-m": {"input": 1.0, "cached": 0.1, "output": 4.0}},
            }
        )


def tool_call_msgs(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(args)},
                }
            ],
        }
        for i, (tool, args) in enumerate(calls)
    ]
