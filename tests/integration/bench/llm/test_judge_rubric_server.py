"""The rubric judge against a real OpenAI-compatible HTTP server (started here
on 127.0.0.1, ephemeral port) that answers scripted replies: yes, no,
garbage, a timeout, 503 then success, and 503 forever; in the reference style
the benchmark's one-word replies, and the tokens each question cost."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bench.llm.client import LLMClient
from bench.llm.config import RoleConfig
from bench.llm.judge import rubric_judge
from judge import JudgeUnavailable, RubricJudge, RubricStyle
from judge.rubric import SYSTEM_PROMPT
from judge.yesno import TEXT_YESNO_SYSTEM, text_user

# The question text picks the script.
SCRIPT = {
    "Q-yes": '{"answer": "yes", "reason": "it says so"}',
    "Q-no": '{"answer": "no", "reason": "it does not"}',
    "Q-garbage": "Yes, definitely!",
    "Q-fenced": '```json\n{"answer": "yes", "reason": "fenced"}\n```',
    "R-Yes": "Yes",
    "R-yes.": "yes.",
    "R-bold": "**Yes**",
    "R-no-yes": "No, yes",
    "R-empty": "",
}


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.hits: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI
    disable_nagle_algorithm = True  # no delayed-ACK stalls on keep-alive replies

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        assert self.path == "/v1/chat/completions"
        user = body["messages"][-1]["content"]
        if "Question: " in user:  # the json style (a re-ask's reminder follows the question)
            question = user.rsplit("Question: ", 1)[1].split("\n", 1)[0]
        else:  # the reference style: the question after the quoted message
            question = user.rsplit("\n</message>\n", 1)[1]
        self.server.hits[question] += 1
        n = self.server.hits[question]
        if question == "Q-timeout":
            time.sleep(1.0)
        if question == "Q-down" or (question == "Q-flaky" and n == 1):
            self._send(503, {"error": {"message": "overloaded", "type": "server_error"}})
            return
        if question == "Q-auth":
            self._send(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
            return
        content = SCRIPT.get(question, '{"answer": "yes", "reason": "recovered"}')
        self._send(
            200,
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": 120,
                    "completion_tokens": 2,
                    "total_tokens": 122,
                    "prompt_tokens_details": {"cached_tokens": 64},
                },
            },
        )


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    srv = FakeOpenAI()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def config(server: FakeOpenAI, **kw: Any) -> RoleConfig:
    base: dict[str, Any] = {
        "model": "judge-test",
        "base_url": server.url,
        "timeout": 0.3,
        "max_retries": 2,
        "backoff_initial": 0.01,
    }
    return RoleConfig(**{**base, **kw})


@contextlib.asynccontextmanager
async def open_judge(cfg: RoleConfig, style: RubricStyle = "json") -> AsyncIterator[RubricJudge]:
    """The judge as bench wires it: the shared client of the three roles, injected."""
    async with LLMClient(cfg, role="judge") as client:
        yield rubric_judge(client, style)


async def test_reference_style_reads_the_benchmarks_one_word_replies(server: FakeOpenAI) -> None:
    """The default style: the benchmark's request, yes iff the first or last word is yes."""
    async with LLMClient(config(server), role="judge") as client:
        judge = rubric_judge(client)  # the role names no style: the reference's
        assert judge.style == "reference"
        answers = await judge.judge(["R-Yes", "R-yes.", "R-bold", "R-no-yes", "R-empty"], "Done <DONE>")
    assert [a.answer for a in answers] == ["yes", "yes", "no", "yes", "no"]
    assert all(a.error is None and a.requests == 1 for a in answers)
    assert answers[0].usage == {"input_tokens": 120, "output_tokens": 2, "cached_tokens": 64, "requests": 1}
    assert sum(server.hits.values()) == 5  # no re-ask: every reply is a yes or a no
    body = server.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": TEXT_YESNO_SYSTEM}
    assert body["messages"][1]["content"] in {text_user("Done <DONE>", q) for q in server.hits}
    assert "Done &lt;DONE&gt;" in body["messages"][1]["content"]


async def test_scripted_answers(server: FakeOpenAI) -> None:
    async with open_judge(config(server)) as judge:
        answers = await judge.judge(
            ["Q-yes", "Q-no", "Q-garbage", "Q-fenced"], "Your refund of $5 is on its way."
        )
    yes, no, garbage, fenced = answers
    assert (yes.answer, yes.reason, yes.passed) == ("yes", "it says so", True)
    assert (no.answer, no.passed) == ("no", False)
    assert garbage.answer is None and not garbage.passed and garbage.error and "not JSON" in garbage.error
    assert garbage.raw == "Yes, definitely!"
    assert server.hits["Q-garbage"] == 2  # parse_attempts: asked again once, then a judge error
    assert garbage.usage == {"input_tokens": 240, "output_tokens": 4, "cached_tokens": 128, "requests": 2}
    garbage_asks = [
        b["messages"][1]["content"] for b in server.bodies if "Q-garbage" in b["messages"][1]["content"]
    ]
    assert len(set(garbage_asks)) == 2  # the re-ask is another request (a reminder of the format)
    assert fenced.answer == "yes"
    body = server.bodies[0]
    assert body["model"] == "judge-test" and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert "Your refund of $5 is on its way." in body["messages"][1]["content"]


async def test_retries_a_503_then_succeeds(server: FakeOpenAI) -> None:
    async with open_judge(config(server)) as judge:
        answer = await judge.ask("Q-flaky", "done")
    assert answer.answer == "yes" and answer.requests == 2 and server.hits["Q-flaky"] == 2


async def test_timeouts_and_outages_raise_judge_unavailable(server: FakeOpenAI) -> None:
    async with open_judge(config(server, max_retries=1)) as judge:
        with pytest.raises(JudgeUnavailable, match="unavailable after 2 attempts: APITimeoutError"):
            await judge.ask("Q-timeout", "done")
        with pytest.raises(JudgeUnavailable, match="unavailable after 2 attempts"):
            await judge.ask("Q-down", "done")
        with pytest.raises(JudgeUnavailable, match="refused the request"):
            await judge.ask("Q-auth", "done")
    assert server.hits["Q-timeout"] == 2 and server.hits["Q-down"] == 2 and server.hits["Q-auth"] == 1


async def test_an_empty_final_message_is_asked(server: FakeOpenAI) -> None:
    async with open_judge(config(server)) as judge:
        answer = await judge.ask("Q-yes", "")
    assert answer.answer == "yes" and answer.requests == 1 and server.hits["Q-yes"] == 1


async def test_unreachable_endpoint_is_unavailable() -> None:
    cfg = RoleConfig(
        model="m", base_url="http://127.0.0.1:9/v1", timeout=0.5, max_retries=1, backoff_initial=0.01
    )
    async with open_judge(cfg) as judge:
        with pytest.raises(JudgeUnavailable, match="APIConnectionError"):
            await judge.ask("Q-yes", "done")
