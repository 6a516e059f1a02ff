"""An agent that tries to void its own failing attempt (issue 38, finding 1), run through the
real `tbx run` CLI: does it get a scored failure, and what does it cost the run's `--out`?

A hostile model endpoint on 127.0.0.1 plays the agent. Each completion answers with a turn
of 15 `zendesk_create_item` calls with a large description (the scenario's create turns),
then turns of 15 `zendesk_get_items` with `$top` 1000 (its read turns), then a final
message with the done tag. The simulated user stops at once. Scenarios:

* issue:     900 KiB descriptions, 10 + 1 turns: the review's scenario, which before the fix
             gave 2 system errors, 0 scored and 2.6 GiB in `--out` for 2 attempts
* under-cap: descriptions just under the proxy's per-call argument cap (so every create is
             stored), 12 + 2 turns: ~11 MB of tickets each list call reads back

Usage::

    TBX_DATASET=bench/packs/demo python benchmarks/self_inflicted.py [--repeat 2]
        [--scenario issue --scenario under-cap]

Per scenario: attempts, scored, system errors (and causes), signatures, calls refused for
their argument size (by the agent side or the proxy: the same words), replies cut by the
proxy, bytes in `--out`, wall time. Exits 1 when any attempt of a
scenario ended in a system error (the agent's own load must be the agent's outcome).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_model import AGENT_MODEL, USER_MODEL, USER_STOP, _completion

from bench.rollout.agents import DONE_TAG
from bench.run.results import read_rows
from sandbox import MAX_ARGUMENT_BYTES

TASK = "demo_retail.py:test_ret_expedite_headphones"
PER_TURN = 15


@dataclass(frozen=True)
class Scenario:
    name: str
    description_bytes: int
    create_turns: int
    read_turns: int


SCENARIOS = {
    "issue": Scenario("issue", 900 * 1024, 10, 1),
    "under-cap": Scenario("under-cap", MAX_ARGUMENT_BYTES - 1024, 12, 2),
}


class HostileModel:
    """An OpenAI-compatible endpoint whose agent floods its own tool server."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.description = "d" * scenario.description_bytes
        self.port = 0
        self._server: uvicorn.Server | None = None

    def _turn(self, done_turns: int) -> list[dict[str, Any]]:
        s = self.scenario
        calls: list[tuple[str, dict[str, Any]]]
        if done_turns < s.create_turns:
            calls = [
                (
                    "zendesk_create_item",
                    {
                        "table": "tickets",
                        "item": {
                            "subject": f"load {done_turns}-{i}",
                            "description": self.description,
                            "status": "open",
                            "requester_id": "CUS-30000001",
                        },
                    },
                )
                for i in range(PER_TURN)
            ]
        elif done_turns < s.create_turns + s.read_turns:
            calls = [("zendesk_get_items", {"table": "tickets", "$top": 1000})] * PER_TURN
        else:
            return []
        return [
            {
                "id": f"call_{done_turns}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        model = body.get("model", AGENT_MODEL)
        if model == USER_MODEL:
            return JSONResponse(_completion(model, {"role": "assistant", "content": USER_STOP}, "stop"))
        messages = body.get("messages", [])
        turns = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        calls = self._turn(turns)
        if calls:
            msg = {"role": "assistant", "content": None, "tool_calls": calls}
            return JSONResponse(_completion(model, msg, "tool_calls"))
        return JSONResponse(_completion(model, {"role": "assistant", "content": f"Done. {DONE_TAG}"}, "stop"))

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": AGENT_MODEL}, {"id": USER_MODEL}]})

    def __enter__(self) -> HostileModel:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models),
            ]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        threading.Thread(target=self._server.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not (self._server.started and self._server.servers):
            if time.monotonic() > deadline:
                raise RuntimeError("hostile model did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True


def _config(path: Path, port: int) -> None:
    base = f"http://127.0.0.1:{port}/v1"
    path.write_text(
        "defaults:\n"
        f"  base_url: {base}\n"
        "  api_key_env: TBX_SELF_INFLICTED_KEY\n"
        "  timeout: 120\n"
        "  max_retries: 0\n"
        f"agent:\n  model: {AGENT_MODEL}\n"
        f"user:\n  model: {USER_MODEL}\n"
        f"judge:\n  model: {USER_MODEL}\n"
    )


def _bytes_under(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _proxy_marks(out: Path) -> tuple[int, int]:
    """(calls refused for their argument size, replies cut) in the run's trajectories."""
    refused = cut = 0
    for f in (out / "trajectories").glob("*.json*"):
        raw = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
        for call in json.loads(raw).get("tool_calls", []):
            result = call.get("result") or ""
            refused += "over the limit of 64 KiB per call; nothing was sent" in result
            cut += "[tbx: reply cut:" in result
    return refused, cut


def run_scenario(scenario: Scenario, repeat: int, dataset: str, tbx: str) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix=f"tbx-self-{scenario.name}-") as tmp,
        HostileModel(scenario) as model,
    ):
        out = Path(tmp) / "out"
        cfg = Path(tmp) / "models.yaml"
        _config(cfg, model.port)
        cmd = [
            tbx, "run", "--dataset", dataset, "--tasks", TASK, "--agent", "llm", "--config", str(cfg),
            "--repeat", str(repeat), "--concurrency", str(min(repeat, 2)), "--out", str(out),
            "--plain", "--skip-rubrics", "--name", f"self-inflicted-{scenario.name}",
        ]  # fmt: skip
        env = {**os.environ, "TBX_SELF_INFLICTED_KEY": uuid.uuid4().hex}
        t = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - t
        rows = read_rows(out / "results.jsonl") if (out / "results.jsonl").exists() else []
        errors = out / "errors.jsonl"
        error_lines = errors.read_text().splitlines() if errors.exists() else []
        refused, cut = _proxy_marks(out)
        return {
            "scenario": scenario.name,
            "exit": proc.returncode,
            "attempts": len(rows),
            "scored": sum(1 for r in rows if not r.system_error),
            "system_errors": sum(1 for r in rows if r.system_error),
            "causes": dict(Counter(str(r.cause) for r in rows if r.system_error)),
            "signatures": dict(Counter(str(r.signature) for r in rows if not r.system_error)),
            "error_lines": len(error_lines),
            "refused_calls": refused,
            "cut_replies": cut,
            "out_bytes": _bytes_under(out),
            "wall_s": round(wall, 1),
            "tail": proc.stdout.strip().splitlines()[-3:] + proc.stderr.strip().splitlines()[-3:],
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--dataset", default=os.environ.get("TBX_DATASET", "bench/packs/demo"))
    ap.add_argument("--tbx", default=str(Path(sys.executable).with_name("tbx")))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [
        run_scenario(SCENARIOS[n], args.repeat, args.dataset, args.tbx) for n in args.scenario or SCENARIOS
    ]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        head = (
            "scenario",
            "attempts",
            "scored",
            "system errors",
            "signatures",
            "refused",
            "cut",
            "--out",
            "wall",
        )
        print(" | ".join(head))
        for r in results:
            print(
                " | ".join(
                    str(x)
                    for x in (
                        r["scenario"], r["attempts"], r["scored"], r["system_errors"] or "0",
                        r["signatures"], r["refused_calls"], r["cut_replies"],
                        f"{r['out_bytes'] / 2**20:.1f} MiB", f"{r['wall_s']} s",
                    )
                )
            )  # fmt: skip
            for line in r["tail"]:
                print("   ", line)
    return 1 if any(r["system_errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
