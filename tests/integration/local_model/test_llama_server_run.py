"""A short `tbx run --agent llm` against a real model server: llama-cpp-python serving a
small GGUF model (docs/local-model.md), agent, simulated user and judge on that one
endpoint with no key, behind a relay that keeps what the server saw
(benchmarks/model_relay.py).

Skipped unless $TBX_LLAMA_PYTHON (an interpreter with `llama-cpp-python[server]`) and
$TBX_LLAMA_MODEL (the GGUF file) are set: the server takes ~20-40 min to build, so CI
does not run this; `make local-model-check` does.

What must hold whatever the model writes: one row per attempt and the run finishes; a
system error is never scored (no signature); every request that offers tools says
`tool_choice` (servers such as this one ignore tools without it); no assistant message
is sent with `content: null` (this server refuses it with HTTP 500); no request carries
an `Authorization` header (the config names no key); and a scored attempt's tokens per
role are the server's own counts for that attempt (unless its wall clock ran out with a
request in flight)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pg_support import DEMO_PACK

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from llama_server import LlamaServer
from model_relay import Relay

from bench.run.results import read_rows

PYTHON = os.environ.get("TBX_LLAMA_PYTHON")
MODEL = os.environ.get("TBX_LLAMA_MODEL")
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not (PYTHON and MODEL and Path(MODEL).is_file()),
        reason="needs $TBX_LLAMA_PYTHON (llama-cpp-python[server]) and $TBX_LLAMA_MODEL (a GGUF file); "
        "docs/local-model.md",
    ),
    pytest.mark.timeout(1800),
]
TASK = "demo_retail.py:test_ret_expedite_headphones"
NAMES = {"agent": "local-agent", "user": "local-user", "judge": "local-judge"}


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    assert PYTHON and MODEL
    log = tmp_path_factory.mktemp("llama") / "server.log"
    server = LlamaServer(PYTHON, MODEL, n_ctx=32768, log=log).start()
    try:
        relay = Relay(server.url).start()
        try:
            yield relay
        finally:
            relay.close()
    finally:
        server.stop()


def test_a_short_run_against_a_real_server(relay: Relay, tmp_path: Path) -> None:
    config = {
        "defaults": {"base_url": relay.base_url, "timeout": 600},
        "agent": {"model": NAMES["agent"], "temperature": 0.0, "seed": 1, "max_tokens": 256},
        "user": {"model": NAMES["user"], "temperature": 0.0, "max_tokens": 128},
        "judge": {"model": NAMES["judge"], "temperature": 0.0, "max_tokens": 128},
    }
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    since = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "run", "--dataset", str(DEMO_PACK), "--tasks", TASK,
         "--agent", "llm", "--config", str(tmp_path / "models.yaml"), "--repeat", "1", "--concurrency", "1",
         "--max-retries", "0", "--wall-clock", "900", "--out", str(out), "--plain"],
        capture_output=True, text=True, timeout=1700,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr  # 3: the run finished with a system error
    [row] = read_rows(out / "results.jsonl")
    if row.system_error:
        assert not row.passed and row.signature is None
    chat = [r for r in relay.since(since) if r.path.endswith("/chat/completions")]
    assert chat, "the server saw no request"
    assert not [r.authorization for r in chat if r.authorization], (
        "a request carried a key the config has not"
    )
    offered = [r for r in chat if r.tools]
    assert offered and all(r.tool_choice is not None for r in offered), "tools offered without tool_choice"
    refused = [(r.status, r.error) for r in chat if r.status != 200]
    assert not [r for r in chat if r.null_content], f"content null sent; the server answered {refused[:2]}"
    assert not refused, refused[:3]
    assert not row.system_error, row.model_extra
    if row.finish_reason == "timeout":
        return  # a request in flight when the wall clock ran out is the server's, in no row
    for role, name in NAMES.items():
        # a one-message request is an endpoint check before the run, not the attempt's
        mine = [r for r in chat if r.role == name and r.messages > 1]
        if role in row.usage:
            u = row.usage[role]
            assert u.input_tokens == sum(int(r.usage.get("prompt_tokens") or 0) for r in mine), role
            assert u.output_tokens == sum(int(r.usage.get("completion_tokens") or 0) for r in mine), role
