"""Several `tbx session-proxy` processes behind one client (issue 38, "Several servers,
one client"): the RL trainer balances sessions over proxies client-side, each session
pinned to one proxy by a hash of its key (specs/thinkingbox-session-proxy.md §7.4,
`MCP_URLS`). One proxy is SIGKILLed mid-batch:

- its sessions' next requests fail with no HTTP answer at all (a transport error), which
  the reference client raises and the trainer drops as a system error (§7.1.4, §7.2); an
  agent's failure is always an HTTP 200: a tool's error text, or effects whose
  `result_db_hash` differs from `golden_db_hash`;
- the other proxy's sessions continue and end in the golden state, and the killed one's
  tasks, created anew there, complete too;
- after the survivor stops and `tbx gc` (orphans: the killed proxy's pid is gone), no
  container or network of either run is left.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from pg_support import DEMO_PACK
from server_process import REPO, free_port, launch, terminate

from bench.dataset import load_benchmark

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
PER_PROXY = 2  # sessions pinned to each proxy


@dataclass
class Proxy:
    url: str
    proc: subprocess.Popen[str]
    log: Path
    run_id: str


def start(tmp: Path, name: str) -> Proxy:
    port = free_port()
    log = tmp / f"{name}.log"
    args = ["session-proxy", "--dataset", str(DEMO_PACK), "--port", str(port), "--warm", "0"]
    proc = launch([sys.executable, "-m", "bench.cli", *args, "--golden-cache", str(tmp / "golden")], log)
    return Proxy(f"http://127.0.0.1:{port}", proc, log, "")


def ready(p: Proxy) -> Proxy:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert p.proc.poll() is None, p.log.read_text()[-3000:]
        text = p.log.read_text()
        if "ready on" in text:
            p.run_id = text.split("(run ", 1)[1].split(")", 1)[0]
            return p
        time.sleep(0.3)
    terminate(p.proc, 60)
    pytest.fail(f"no ready line within 180 s: {p.log.read_text()[-3000:]}")


@pytest.fixture()
def proxies(tmp_path: Path) -> Iterator[list[Proxy]]:
    started = [start(tmp_path, "a"), start(tmp_path, "b")]
    try:
        yield [ready(p) for p in started]
    finally:
        for p in started:
            terminate(p.proc, 120)


# ---- the client: the reference's calls, its error conversion, the trainer's balancing ----------
class SystemFailure(Exception):
    """What the reference client raises for a request without a 2xx answer (§7.1.4): the
    trainer drops the rollout as a system error. `status` None: no HTTP answer at all."""

    def __init__(self, route: str, status: int | None, detail: str):
        super().__init__(f"{route}: {status}: {detail[:200]}")
        self.status = status


def post(url: str, route: str, body: dict[str, Any]) -> Any:
    try:  # a new client per request, as MCPProxyClient makes them
        with httpx.Client(timeout=httpx.Timeout(30.0, read=600.0)) as c:
            r = c.post(f"{url}/{route}", json=body)
    except httpx.TransportError as exc:
        raise SystemFailure(route, None, repr(exc)) from None
    if not 200 <= r.status_code < 300:
        raise SystemFailure(route, r.status_code, r.text)
    return r.json()["content"]["value"]


def pinned(urls: list[str], key: str) -> str:
    """The trainer's balancing: a session's proxy is a stable hash of its key."""
    return urls[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(urls)]


def keys_for(urls: list[str]) -> dict[str, list[str]]:
    """PER_PROXY session ids pinned to each proxy."""
    out: dict[str, list[str]] = {u: [] for u in urls}
    while any(len(v) < PER_PROXY for v in out.values()):
        sid = str(uuid.uuid4())
        bucket = out[pinned(urls, sid)]
        if len(bucket) < PER_PROXY:
            bucket.append(sid)
    return out


def labelled(run_id: str) -> tuple[list[str], list[str]]:
    client = docker.from_env()
    try:
        filters = {"label": f"tbx.run={run_id}"}
        return (
            [c.name for c in client.containers.list(all=True, filters=filters, ignore_removed=True)],
            [n.name for n in client.networks.list(filters=filters)],
        )
    finally:
        client.close()


def test_a_killed_proxy_fails_its_sessions_as_system_errors_and_the_other_continues(
    proxies: list[Proxy],
) -> None:
    bench = load_benchmark(DEMO_PACK, strict=False)
    task = bench.task(TASK)
    server = bench.scenario_of(task).servers[0]
    config = {server: bench.effective_init(task).raw}
    tools = list(bench.scenario_of(task).tool_names)
    calls = bench.golden_calls(task)
    urls = [p.url for p in proxies]
    victim, survivor = proxies
    sessions = keys_for(urls)

    def create(url: str, sid: str) -> None:
        body = {"session_id": sid, "server_config": config, "available_tools": tools, "timeout": 570.0}
        assert post(url, "session_create", body) == {server: {}}

    def call(url: str, sid: str, name: str, arguments: dict[str, Any]) -> str:
        body = {"session_id": sid, "tool_name": name, "arguments": arguments}
        text = post(url, "call_tool", body)
        assert isinstance(text, str)
        return text

    def finish(url: str, sid: str, start: int) -> dict[str, Any]:
        for name, arguments in calls[start:]:
            call(url, sid, name, arguments)
        effects = post(url, "get_effects", {"session_id": sid})[server]
        assert post(url, "session_destroy", {"session_id": sid}) == "Ok"
        return dict(effects)

    # The batch: every session created on its pinned proxy and its first call made.
    batch = [(url, sid) for url, ids in sessions.items() for sid in ids]
    with ThreadPoolExecutor(len(batch)) as pool:
        list(pool.map(lambda us: create(*us), batch))
        list(pool.map(lambda us: call(us[0], us[1], *calls[0]), batch))

    # Mid-batch, the first proxy dies without a word.
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=30)

    # Its sessions' next requests get no HTTP answer: a system error, never a graded 0.
    for sid in sessions[victim.url]:
        with pytest.raises(SystemFailure) as lost:
            finish(victim.url, sid, 1)
        assert lost.value.status is None

    # The survivor's sessions continue to the golden state; an agent's failure there is an
    # HTTP 200 (a tool's error text, effects off the golden state), told apart by its shape.
    with ThreadPoolExecutor(PER_PROXY) as pool:
        done = list(pool.map(lambda sid: finish(survivor.url, sid, 1), sessions[survivor.url]))
    assert all(e["result_db_hash"] == e["golden_db_hash"] and e["diff"] == [] for e in done)
    agent_fail = str(uuid.uuid4())
    create(survivor.url, agent_fail)
    error_text = call(survivor.url, agent_fail, calls[0][0], {})  # arguments missing: the tool's error
    assert "error" in json.loads(error_text)
    effects = finish(survivor.url, agent_fail, len(calls))  # no state-changing call made
    assert effects["result_db_hash"] != effects["golden_db_hash"] and effects["diff"]

    # The trainer refills the lost rollouts: created anew on the survivor, they complete.
    retried = [str(uuid.uuid4()) for _ in sessions[victim.url]]
    with ThreadPoolExecutor(len(retried)) as pool:
        list(pool.map(lambda sid: create(survivor.url, sid), retried))
        redone = list(pool.map(lambda sid: finish(survivor.url, sid, 0), retried))
    assert all(e["result_db_hash"] == e["golden_db_hash"] for e in redone)

    # The killed proxy's containers and network are orphans (any tbx start-up on this daemon
    # may sweep them before `tbx gc` does); the survivor cleans its own up.
    assert terminate(survivor.proc, 120) == 128 + signal.SIGTERM
    assert labelled(survivor.run_id) == ([], [])
    gc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "gc"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert gc.returncode == 0, gc.stderr
    assert labelled(victim.run_id) == ([], []), gc.stdout + gc.stderr
