"""`tbx run` against a flapping model endpoint (an OpenAI-compatible stub on 127.0.0.1).

The stub (benchmarks/stub_model.py, which plays the task's golden calls as an
agent would) is wrapped so that its requests, in turn, get a 429, a 500, a
200 whose body is cut-off JSON, and no answer until the client's timeout;
every fifth request is answered. With the config's `max_retries: 4` each
completion gets through, so those attempts pass. Requests of repeat 2
(recognised by the seed the client sends, `seed` + repeat) get a 503 after each try's
first step (answered, so each try spends tokens, which its row counts):
that attempt's endpoint retries run out, each of its tries is a system error
(model endpoint) and, the run's retries (--max-retries 3) spent, so is its row. The run's
`done:` line and `tbx report` say how many system errors there were, and why.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import DEMO_PACK
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bench.run.results import read_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "benchmarks"))
from stub_model import AGENT_MODEL, USER_MODEL, StubModel

from bench.dataset import load_benchmark

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

TASK = "demo_retail.py:test_ret_expedite_headphones"
SEED = 1000
DOWN_REPEAT = 2
TIMEOUT = 1.5
RUN_RETRIES = 3  # tries of an attempt after a system error (tbx run --max-retries)


class FlappingModel(StubModel):
    """429, 500, malformed JSON, a hang, then an answer, over and over; the
    requests of repeat DOWN_REPEAT always get a 503."""

    def __init__(self) -> None:
        super().__init__(load_benchmark(DEMO_PACK, strict=False), delay=0.0)
        self.requests = 0
        self.faults: dict[str, int] = {}

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        if body.get("seed") == SEED + DOWN_REPEAT:
            if not any(m["role"] == "assistant" for m in body["messages"]):
                return await super()._chat(request)  # a try's first step is answered: it spends
            return self._fault("503", JSONResponse({"error": {"message": "overloaded"}}, status_code=503))
        n, self.requests = self.requests, self.requests + 1
        match n % 5:
            case 0:
                return self._fault("429", JSONResponse({"error": {"message": "slow down"}}, status_code=429))
            case 1:
                return self._fault("500", JSONResponse({"error": {"message": "oops"}}, status_code=500))
            case 2:
                return self._fault(
                    "json", Response(b'{"id": "x", "choices": [', media_type="application/json")
                )
            case 3:
                await asyncio.sleep(TIMEOUT * 3)  # the client gives up first
                return self._fault("hang", Response(b"", status_code=504))
        return await super()._chat(request)

    def _fault(self, kind: str, response: Response) -> Response:
        self.faults[kind] = self.faults.get(kind, 0) + 1
        return response


@pytest.fixture
def model() -> Iterator[FlappingModel]:
    stub = FlappingModel()
    stub.start()
    yield stub
    stub.close()


def test_a_flapping_endpoint_is_retried_and_spent_retries_are_counted_system_errors(
    model: FlappingModel, tmp_path: Path
) -> None:
    role = {
        "base_url": model.base_url,
        "api_key": "stub",
        "timeout": TIMEOUT,
        "max_retries": 4,
        "backoff_initial": 0.05,
        "backoff_max": 0.2,
    }
    config = {"agent": {"model": AGENT_MODEL, "seed": SEED, **role}, "user": {"model": USER_MODEL, **role}}
    (tmp_path / "models.json").write_text(json.dumps(config))
    out = tmp_path / "run"
    args = [sys.executable, "-m", "bench.cli", "run", "--dataset", str(DEMO_PACK), "--tasks", TASK]
    args += ["--agent", "llm", "--config", str(tmp_path / "models.json"), "--repeat", "3"]
    args += ["--concurrency", "1", "--warm", "0", "--max-retries", str(RUN_RETRIES), "--skip-rubrics"]
    args += ["--plain"]
    args += ["--out", str(out), "--golden-cache", str(tmp_path / "golden")]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1500)

    assert proc.returncode == 3, proc.stderr  # some attempts ended in system errors
    assert {"429", "500", "json", "hang", "503"} <= set(model.faults), model.faults
    rows = {r.repeat: r for r in read_rows(out / "results.jsonl")}
    assert sorted(rows) == [0, 1, 2]
    assert rows[0].passed and rows[1].passed, [rows[0].error, rows[1].error]
    down = rows[DOWN_REPEAT]
    assert down.system_error and down.error is not None
    assert down.error.startswith("ModelEndpointError: agent model endpoint") and "HTTP 503" in down.error
    assert "after 5 attempts" in down.error  # the config's max_retries: 4, then no more
    assert (down.model_extra or {})["retries"] == RUN_RETRIES
    # What ended it, and every try's spend (the stub's 100 input / 10 output tokens a step):
    # its own try's in `usage`, the retried tries' beside it.
    assert down.finish_reason == "system_error" and down.cause == "model endpoint"
    assert (down.usage["agent"].input_tokens, down.usage["agent"].output_tokens) == (100, 10)
    assert down.retried_usage["agent"].input_tokens == 100 * RUN_RETRIES
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    # Its tries, each a line; the endpoint's errors are all its own. (A busy machine's slow
    # sandbox start may make a try a container error instead: counted under that cause.)
    down_tries = [(e["try"], e["retried"]) for e in errors if e["repeat"] == DOWN_REPEAT]
    assert down_tries == [(n, True) for n in range(1, RUN_RETRIES + 1)] + [(RUN_RETRIES + 1, False)]
    endpoint = [e for e in errors if e["cause"] == "model endpoint"]
    assert endpoint and all(e["repeat"] == DOWN_REPEAT for e in endpoint)
    assert "1 system errors (model endpoint 1), " in proc.stderr, proc.stderr
    retried = len([e for e in endpoint if e["retried"]])
    assert re.search(rf"\d+ tries retried \((.*, )?model endpoint {retried}\b", proc.stderr), proc.stderr

    report = subprocess.run(
        [sys.executable, "-m", "bench.cli", "report", str(out)], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    assert "| 1 (model endpoint 1) |" in report.stdout, report.stdout  # the summary's system errors
    flags = (out / "report.md").read_text()
    assert "1 attempts ended in a system error still there after the retries (model endpoint 1)" in flags, (
        flags
    )
    as_json = subprocess.run(
        [sys.executable, "-m", "bench.cli", "report", str(out), "--json"], capture_output=True, text=True
    )
    metrics = json.loads(as_json.stdout)
    assert metrics["system_errors"] == 1 and metrics["system_error_causes"] == {"model endpoint": 1}
    spent = sum(r.spent_usage["agent"].input_tokens for r in rows.values())
    assert metrics["spent"]["agent"]["input_tokens"] == spent >= 100 * (RUN_RETRIES + 1)
    assert all("timings" in e for e in errors)
