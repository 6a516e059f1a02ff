"""What `tbx session-proxy` takes on (#38 finding 7), over real HTTP against a real server:
the session cap refuses at once with 429 and Retry-After and leaves nothing behind, an
over-limit body is a 413 that does not grow the process, slow and half-sent requests are
closed after their timeouts, and `/health` answers within the OpenEnv readiness budget
while a create is in flight and under a flood of large bodies.

One server: no warm pool, one session at most, short head and body timeouts (hidden flags).
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import httpx
import pytest
from sandbox_containers import containers_gone
from session_api_server import Served, create, serving, traced_task, value

from bench.dataset import Benchmark, load_benchmark
from bench.defaults import MAX_BODY_MIB

pytestmark = pytest.mark.docker

TIMEOUT = 2.0  # the server's head and body timeouts here
READY_BUDGET = 3.0  # s: the OpenEnv env's /ready waits this long for /health
MIB = 2**20


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("session-api-limits")
    limits = ("--max-sessions", "1", "--head-timeout", str(TIMEOUT), "--body-timeout", str(TIMEOUT))
    with serving(tmp, dataset, "--warm", "0", *limits) as s:
        yield s


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _open_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _run_containers(run_id: str) -> set[str]:
    client = docker.from_env()
    found = client.containers.list(all=True, filters={"label": f"tbx.run={run_id}"}, ignore_removed=True)
    return {c.id for c in found}


class HealthPoll:
    """/health every 50 ms on one kept-alive connection, in a thread, until stopped."""

    def __init__(self, url: str):
        self.url = url
        self.latencies: list[float] = []
        self.statuses: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as c:
            while not self._stop.is_set():
                t0 = time.monotonic()
                self.statuses.add(c.get("/health").status_code)
                self.latencies.append(time.monotonic() - t0)
                self._stop.wait(0.05)

    def __enter__(self) -> HealthPoll:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def check(self) -> str:
        assert self.latencies and self.statuses == {200}, self.statuses
        median, worst = statistics.median(self.latencies), max(self.latencies)
        assert median < 0.5 and worst < READY_BUDGET, (median, worst)
        return f"/health n={len(self.latencies)} median {median * 1000:.0f} ms max {worst * 1000:.0f} ms"


def test_the_cap_refuses_at_once_with_retry_after_and_leaks_nothing(served: Served, bench: Benchmark) -> None:
    task = traced_task(bench, "sandbox_external_retail")
    before = _run_containers(served.run_id)
    with served.client() as c, ThreadPoolExecutor(1) as pool, HealthPoll(served.url) as health:
        first = pool.submit(create, c, "held", task)
        time.sleep(1.0)  # the first create holds the one place while it boots
        t0 = time.monotonic()
        refused = create(c, "refused", task)
        elapsed = time.monotonic() - t0
        assert value(refused, 429).startswith("Server at capacity: 1/1 sessions")
        assert int(refused.headers["retry-after"]) > 0 and elapsed < READY_BUDGET, elapsed
        made = first.result()
        value(made)
    print(health.check())
    held = set(json.loads(made.headers["x-tbx-containers"]).values())
    with served.client() as c:
        # at capacity once created too; the refused create left no container and no session
        assert value(create(c, "refused", task), 429).startswith("Server at capacity")
        assert _run_containers(served.run_id) - before == held
        assert value(c.post("/list_tools", json={"session_id": "refused"}), 400) == "Session does not exist"
        value(c.post("/session_destroy", json={"session_id": "held"}))
        assert containers_gone(docker.from_env(), list(held))
        # the place is free again
        again = create(c, "after", task)
        value(again)
        value(c.post("/session_destroy", json={"session_id": "after"}))
    assert _run_containers(served.run_id) == before


def _bytes(n: int, chunk: int = MIB) -> Iterator[bytes]:
    sent = 0
    while sent < n:
        yield b" " * min(chunk, n - sent)
        sent += chunk


def test_an_over_limit_body_is_a_413_that_does_not_grow_the_process(served: Served) -> None:
    pid = served.proc.pid
    huge = 97_000_000  # what took the reference-shaped server to 2.6 GB RSS
    with httpx.Client(base_url=served.url, timeout=60) as c:
        c.get("/health")
        rss0 = _rss_mib(pid)
        declared = c.post("/session_create", content=_bytes(huge), headers={"content-length": str(huge)})
        chunked = c.post("/session_create", content=_bytes(huge))  # no Content-Length: counted as read
        rss1 = _rss_mib(pid)
        # a body within the limit is read and answered as ever
        small = c.post("/session_create", content=b" " * (MIB // 2))
    for r in (declared, chunked):
        assert r.status_code == 413 and r.headers["connection"] == "close"
        assert value(r, 413).startswith("Request body too large")
    assert str(huge) in declared.text and f"({MAX_BODY_MIB} MiB)" in chunked.text
    assert value(small, 400) == "Invalid input"
    # at most one limit's worth was ever held (the chunked body up to the limit)
    assert rss1 - rss0 < 2 * MAX_BODY_MIB + 16, (rss0, rss1)


def test_slow_and_half_sent_requests_are_closed_after_their_timeouts(served: Served) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    pid = served.proc.pid
    fds0 = _open_fds(pid)
    socks: dict[str, list[socket.socket]] = {"idle": [], "half head": [], "half body": []}
    for _ in range(40):
        for kind in socks:
            s = socket.create_connection(("127.0.0.1", port))
            s.settimeout(TIMEOUT * 10)
            if kind == "half head":
                s.sendall(b"POST /session_create HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            elif kind == "half body":
                s.sendall(b"POST /session_create HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
            socks[kind].append(s)
    t0 = time.monotonic()
    while _open_fds(pid) < fds0 + 100 and time.monotonic() - t0 < TIMEOUT / 2:
        time.sleep(0.05)
    assert _open_fds(pid) >= fds0 + 100  # the server has taken them
    answers: dict[str, set[bytes]] = {}
    for kind, group in socks.items():
        for s in group:
            got = b""
            while chunk := s.recv(4096):  # until the server closes
                got += chunk
            s.close()
            answers.setdefault(kind, set()).add(got.split(b"\r\n", 1)[0])
    elapsed = time.monotonic() - t0
    # a request with no head or half a head is closed without a word; half a body is a 408
    assert answers == {"idle": {b""}, "half head": {b""}, "half body": {b"HTTP/1.1 408 Request Timeout"}}
    assert elapsed < TIMEOUT + 5, elapsed
    deadline = time.monotonic() + 10
    while _open_fds(pid) > fds0 + 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _open_fds(pid) <= fds0 + 5, (fds0, _open_fds(pid))


def test_health_stays_fast_under_a_body_flood(served: Served) -> None:
    pid = served.proc.pid
    rss0 = _rss_mib(pid)
    within = json.dumps(
        {
            "session_id": "f",
            "server_config": {"x": {"doc": " " * (MAX_BODY_MIB * MIB // 2)}},
            "available_tools": [],
        }
    ).encode()
    counts: dict[tuple[str, int | str], int] = {}
    lock = threading.Lock()

    def flood(kind: str) -> None:
        end = time.monotonic() + 8
        with httpx.Client(base_url=served.url, timeout=60) as c:
            while time.monotonic() < end:
                try:
                    if kind == "declared":
                        huge = 50 * MIB
                        r = c.post(
                            "/session_create", content=_bytes(huge), headers={"content-length": str(huge)}
                        )
                    elif kind == "chunked":
                        r = c.post("/session_create", content=_bytes(20 * MIB))
                    else:
                        r = c.post("/session_create", content=within)
                    key: tuple[str, int | str] = (kind, r.status_code)
                except httpx.HTTPError as exc:
                    key = (kind, type(exc).__name__)
                with lock:
                    counts[key] = counts.get(key, 0) + 1

    with HealthPoll(served.url) as health, ThreadPoolExecutor(6) as pool:
        list(pool.map(flood, ["declared", "chunked", "within"] * 2))
    print(health.check(), counts, f"RSS {rss0:.0f} -> {_rss_mib(pid):.0f} MiB")
    # every flood request was answered: 413 over the limit, 400 for a body that is no create
    assert {status for (_, status) in counts} <= {413, 400, 429, 503}, counts
    assert counts.get(("within", 400), 0) > 0 and counts.get(("declared", 413), 0) > 0
