"""Tool proxy overhead per tool call, measured side by side in one run.

Starts one real sandbox (a retail task, no Typesense), registers it with the
tool proxy, and times N calls of a cheap read-only tool (`get_order` on a
seeded order) twice over, interleaved call by call so both paths see the same
machine load:

* ``direct``: an MCP client straight to the server container (bridge IP);
* ``proxy``:  the same client through the proxy (bearer token, allow-list,
  recording, per-call timeout), which forwards over its long-lived upstream
  session.

Proxy variants (``--mode``, default all three):

* ``inproc``: `ProxyServer` in a background thread of this process, as the
  runner uses it (it shares the GIL with the client); tool calls take the
  fast relay path (`sandbox.proxy.relay`);
* ``sdk``: the same with ``fast_path=False``: every call through the proxy's
  own MCP `Server` and its upstream `mcp.Client` (for comparison);
* ``standalone``: `tbx proxy` as a separate process, registered over its
  admin API (relay path).

Usage::

    python benchmarks/proxy_overhead.py [-n 200] [--warmup 20] [--mode inproc|sdk|standalone|all]

Prints p50/p95 per path and the added p50 (target: < 2 ms). Containers carry
``tbx.run=bench-proxy-<id>`` and are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.dataset import default_root, load_benchmark  # noqa: E402
from bench.prepare import initial_state, sandbox_request  # noqa: E402
from bench.run.attempt import task_tool_policy  # noqa: E402
from sandbox import (  # noqa: E402
    AdminClient,
    AsyncSandbox,
    ProxyServer,
    Registration,
    Sandbox,
    proxy_client,
    register_request,
    sweep,
    upstream_client,
)

TASK = "sandbox_external_retail_group1.py:test_case_ST002_001"
ORDERS = "external_retail_toolset_oms_models_orders"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Timings:
    def __init__(self) -> None:
        self.direct: list[float] = []
        self.proxy: list[float] = []
        self.proxy_cpu_ms = 0.0  # CPU the proxy used per measured call


async def measure(
    direct_url: str,
    direct_headers: dict[str, str],
    reg: Registration,
    order_id: str,
    n: int,
    warmup: int,
    cpu: Callable[[], float],
) -> Timings:
    """n interleaved pairs of calls (after `warmup` pairs); `cpu()` reads the proxy's CPU seconds."""
    out = Timings()
    args = {"order_id": order_id}
    async with upstream_client(direct_url, direct_headers) as direct, proxy_client(reg) as proxied:
        for _ in range(warmup):
            await direct.call_tool("get_order", args)
            await proxied.call_tool("get_order", args)
        cpu0 = cpu()
        for i in range(n):
            pair = ((direct, out.direct), (proxied, out.proxy))
            for client, sink in pair if i % 2 == 0 else pair[::-1]:
                t = time.perf_counter()
                res = await client.call_tool("get_order", args)
                sink.append((time.perf_counter() - t) * 1000)
                if res.is_error:
                    raise RuntimeError(f"get_order failed: {res.content}")
        # the proxy is idle during direct calls, so this is its CPU for the n proxied calls
        out.proxy_cpu_ms = (cpu() - cpu0) * 1000 / n
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def standalone_proxy() -> Iterator[tuple[AdminClient, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", "proxy", "--json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        with AdminClient(info["admin_url"], info["admin_token"]) as admin:
            yield admin, proc
    finally:
        proc.terminate()
        proc.wait(30)


def report(label: str, t: Timings, recorded: list[float]) -> dict[str, float]:
    d50, d95 = pct(t.direct, 0.5), pct(t.direct, 0.95)
    p50, p95 = pct(t.proxy, 0.5), pct(t.proxy, 0.95)
    pairs = [p - d for p, d in zip(t.proxy, t.direct, strict=True)]
    print(f"[{label}] {len(t.direct)} calls each of get_order")
    print(f"  direct  p50 {d50:6.2f} ms   p95 {d95:6.2f} ms   mean {statistics.fmean(t.direct):6.2f} ms")
    print(f"  proxy   p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   mean {statistics.fmean(t.proxy):6.2f} ms")
    print(
        f"  added p50 {p50 - d50:+6.2f} ms   (median of per-pair differences {statistics.median(pairs):+6.2f} ms)"
    )
    print(f"  proxy CPU per call {t.proxy_cpu_ms:6.2f} ms")
    if recorded:
        print(f"  proxy-side forward time (recorded latency_ms) p50 {pct(recorded, 0.5):6.2f} ms")
    return {
        "direct_p50": d50,
        "direct_p95": d95,
        "proxy_p50": p50,
        "proxy_p95": p95,
        "added_p50": p50 - d50,
        "added_pair_median": statistics.median(pairs),
        "proxy_cpu_ms": t.proxy_cpu_ms,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--mode", choices=["inproc", "sdk", "standalone", "all"], default="all")
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--task", default=TASK)
    args = ap.parse_args()

    bench = load_benchmark(Path(args.dataset) if args.dataset else default_root(), strict=False)
    task = bench.task(args.task)
    policy = task_tool_policy(bench, task)
    run_id = f"bench-proxy-{uuid.uuid4().hex[:8]}"
    request = sandbox_request(bench, task, typesense=False, run_id=run_id)
    order_id = initial_state(bench, task)[ORDERS][0]["id"]
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    results = {}
    try:
        with Sandbox(request) as sb:
            assert sb.handle is not None
            direct_url, direct_headers = sb.handle.servers[task.domain], sb.handle.server_headers
            registration = register_request(AsyncSandbox.adopt(sb), sb.attempt_id, policy)
            for mode, fast, label in (
                ("inproc", True, "proxy in-process (background thread), relay path"),
                ("sdk", False, "proxy in-process, SDK path (MCP Server + upstream mcp.Client)"),
            ):
                if args.mode not in (mode, "all"):
                    continue
                with ProxyServer(fast_path=fast) as proxy:
                    reg = proxy.register(registration)
                    t = asyncio.run(
                        measure(
                            direct_url, direct_headers, reg, order_id, args.n, args.warmup, proxy.cpu_time
                        )
                    )
                    recorded = [c.latency_ms for c in proxy.unregister(reg.token)][args.warmup :]
                results[mode] = report(label, t, recorded)
            if args.mode in ("standalone", "all"):
                with standalone_proxy() as (admin, proc):
                    reg = admin.register(
                        registration.model_copy(update={"attempt_id": sb.handle.attempt_id + "-s"})
                    )
                    t = asyncio.run(
                        measure(
                            direct_url,
                            direct_headers,
                            reg,
                            order_id,
                            args.n,
                            args.warmup,
                            lambda: process_cpu(proc.pid),
                        )
                    )
                    recorded = [c.latency_ms for c in admin.unregister(reg.token)][args.warmup :]
                results["standalone"] = report(
                    "proxy standalone (`tbx proxy` process), relay path", t, recorded
                )
    finally:
        sweep(run=run_id)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
