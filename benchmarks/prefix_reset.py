"""An OpenEnv reset that starts part-way against a plain one (issue 37): `tbx env serve
--warm W` on one retail task with ten golden calls, the pool ahead before every reset
(W booted spares, each prepared for the task: a reset is a hand-over), resets over a raw
WebSocket alternating plain and with the task's ten golden calls as `prefix`.

    python benchmarks/prefix_reset.py [--task ID] [--repeats 5] [--warm 2] [--json]

The benchmark reads the golden calls from the dataset on the client side (a client's
prefix is its own; the server never offers golden calls). Each reset is timed from the
message sent to its observation received; the episode is then closed unplayed (recorded as
abandoned). Printed: median and p90 of each kind, the difference per prefix call, the
load average around the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openenv_load import closing_user_config, free_port, pct, pool_ahead, ready_body

from bench.dataset import default_root, load_benchmark
from sandbox import leftovers

REPO = Path(__file__).resolve().parents[1]
TASK = "sandbox_external_retail_group1.py:test_case_ST009_004"  # ten golden calls


def reset_once(url: str, data: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """One reset over a fresh socket: (seconds, observation); the socket's close ends it."""
    with connect(url.replace("http://", "ws://") + "/ws", open_timeout=30, max_size=None) as ws:
        t = time.perf_counter()
        ws.send(json.dumps({"type": "reset", "data": data}))
        reply = json.loads(ws.recv(timeout=600))
        took = time.perf_counter() - t
    if reply.get("type") != "observation":
        raise SystemExit(f"reset failed: {reply}")
    return took, reply["data"]["observation"]


def wait_ahead(url: str, warm: int, proc: subprocess.Popen[bytes], timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SystemExit("env serve exited")
        body = ready_body(url)
        if body.get("ready") and pool_ahead(body, warm) and body.get("episodes", {}).get("active", 1) == 0:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the pool was not ahead within {timeout:g} s: {body}")
        time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default=TASK)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bench = load_benchmark(default_root())
    task = bench.task(args.task)
    prefix = [{"tool": t, "arguments": a} for t, a in bench.golden_calls(task)]
    times: dict[str, list[float]] = {"plain": [], "prefix": []}
    with tempfile.TemporaryDirectory(prefix="tbx-prefix-reset-") as tmp:
        root = Path(tmp)
        stub, config = closing_user_config(root)
        port = free_port()
        cmd = [
            sys.executable, "-m", "bench.cli", "env", "serve", "--dataset", str(bench.root),
            "--config", str(config), "--port", str(port), "--out", str(root / "out"),
            "--tasks", task.id, "--max-episodes", "2", "--warm", str(args.warm),
            "--golden-cache", str(root / "golden"), "--skip-rubrics", "--start-timeout", "600",
        ]  # fmt: skip
        log = (root / "server.log").open("w")
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        load = [os.getloadavg()[0]]
        try:
            for i in range(2 * args.repeats):
                kind = "plain" if i % 2 == 0 else "prefix"
                wait_ahead(url, args.warm, proc)
                time.sleep(2)  # the last replacement's boot settles
                data: dict[str, Any] = {
                    "test_uid": task.id,
                    **({"prefix": prefix} if kind == "prefix" else {}),
                }
                took, obs = reset_once(url, data)
                if kind == "prefix":
                    told = obs["metadata"]["prefix"]
                    if len(told) != len(prefix) or any(c["tool_error"] for c in told):
                        raise SystemExit(f"the prefix did not replay cleanly: {told}")
                times[kind].append(took)
                print(f"{kind:6} {took:.3f} s", file=sys.stderr, flush=True)
            pools = ready_body(url).get("pools", {})
            run_id = json.loads((root / "out" / "manifest.json").read_text())["run_id"]
        finally:
            load.append(os.getloadavg()[0])
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=300)
            stub.shutdown()
    containers, networks = leftovers(run_id)
    plain, pre = times["plain"], times["prefix"]
    extra = statistics.median(pre) - statistics.median(plain)
    result = {
        "task": task.id,
        "prefix_calls": len(prefix),
        "repeats": args.repeats,
        "warm": args.warm,
        "plain_median_s": round(statistics.median(plain), 3),
        "plain_p90_s": round(pct(plain, 0.9), 3),
        "prefix_median_s": round(statistics.median(pre), 3),
        "prefix_p90_s": round(pct(pre, 0.9), 3),
        "per_prefix_call_ms": round(extra / len(prefix) * 1000, 1),
        "handovers": sum(p.get("handovers", 0) for p in pools.values()),
        "checkouts": sum(p.get("checkouts", 0) for p in pools.values()),
        "load": [round(x, 1) for x in load],
        "leftovers": len(containers) + len(networks),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"| reset | median | p90 |\n|---|---|---|\n"
              f"| plain | {result['plain_median_s']} s | {result['plain_p90_s']} s |\n"
              f"| {len(prefix)}-call prefix | {result['prefix_median_s']} s | {result['prefix_p90_s']} s |\n"
              f"per prefix call: {result['per_prefix_call_ms']} ms; hand-overs {result['handovers']}/"
              f"{result['checkouts']}; load {result['load']}; leftovers {result['leftovers']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
