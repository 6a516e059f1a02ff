"""Fixtures for the real-Docker integration tests of `sandbox/`.

Everything here talks to the real Docker daemon and the real tbx images; a
missing daemon or image fails the test (it is never skipped). Every container
and network is created through the sandbox API (labelled `tbx.run`) or carries
a `tbx.run` label itself, and is removed by the fixture that created it.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from daemon_probe import UNANSWERED_BEFORE_STOP, daemon_state, unanswered
from pg_support import DEMO_PACK
from typesense_container import Running, build_typesense_image, start_hardened

from bench.dataset import Benchmark, load_benchmark
from bench.prepare import seeded_request
from sandbox import AsyncSandbox, AttemptHandle, SandboxError, docker_client, leftovers, require_image, sweep
from sandbox import labels as lbl
from servers.engine.seeding import initial_rows
from servers.registry import load_domain

REPO = Path(__file__).resolve().parents[2]
RETAIL_SEED = "servers/mcp_sandbox_external_retail/seed.json"

# A one-liner run inside a container: TCP connect with a 1 s timeout, print the errno (0 = connected).
CONNECT = (
    "import socket,sys\n"
    "s=socket.socket()\n"
    "s.settimeout(1.0)\n"
    "print(s.connect_ex((sys.argv[1], int(sys.argv[2]))))"
)


OUTSIDE_PORT = 9000
LISTEN = (
    "import socket\n"
    "s=socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind(('0.0.0.0', {OUTSIDE_PORT}))\n"
    "s.listen(16)\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    c.close()\n"
)


_unanswered: list[str] = []  # the failed tests after which the daemon did not answer


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """After a Docker test fails, ask the daemon: one that no longer answers is reported
    with what it is doing, and stops the session (daemon_probe)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed or item.get_closest_marker("docker") is None:
        return
    why = unanswered()
    if why is None:
        return
    _unanswered.append(item.nodeid)
    report.sections.append(("Docker daemon not answering", f"{why}\n{daemon_state()}"))
    if len(_unanswered) >= UNANSWERED_BEFORE_STOP:
        item.session.shouldstop = (
            f"the Docker daemon stopped answering (after {', '.join(_unanswered)}): {why}; "
            "every later test would fail on its own timeout (see 'Docker daemon not answering' above)"
        )


@pytest.fixture(scope="session")
def dclient() -> docker.DockerClient:
    try:
        return docker_client()
    except SandboxError as exc:
        pytest.fail(f"integration tests need Docker: {exc}")


@pytest.fixture(scope="session")
def tbx() -> str:
    """The `tbx` console script of this interpreter's environment."""
    path = Path(sys.executable).with_name("tbx")
    assert path.exists(), f"{path} missing: pip install -e . into this environment"
    return str(path)


@pytest.fixture(scope="session")
def base_images(dclient: docker.DockerClient) -> dict[str, str]:
    """The postgres and servers image tags (fails with the build hint when one is missing)."""
    try:
        return {name: require_image(name) for name in ("postgres", "servers")}
    except SandboxError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def typesense_image(dclient: docker.DockerClient) -> str:
    """The tbx Typesense image: $TBX_TYPESENSE_IMAGE if set, else built from images/typesense/."""
    tag = os.environ.get("TBX_TYPESENSE_IMAGE")
    if tag:
        try:
            dclient.images.get(tag)
        except docker.errors.ImageNotFound:
            pytest.fail(f"TBX_TYPESENSE_IMAGE={tag} does not exist")
        return tag
    return build_typesense_image(dclient)


@pytest.fixture(scope="module")
def typesense(dclient: docker.DockerClient, typesense_image: str) -> Iterator[Running]:
    """A hardened container of the tbx Typesense image, for the module."""
    running = start_hardened(dclient, typesense_image)
    try:
        yield running
    finally:
        running.container.remove(force=True)


@pytest.fixture(scope="module")
def demo_bench() -> Benchmark:
    """The embedded demo pack (bench/packs/demo), loaded once per module."""
    return load_benchmark(DEMO_PACK, strict=False)


@pytest.fixture(scope="session")
def retail_seed_file(dataset: Path) -> Path:
    return dataset / RETAIL_SEED


@pytest.fixture(scope="session")
def retail_rows(retail_seed_file: Path) -> dict[str, list[dict[str, Any]]]:
    """The retail domain's real initial rows (validated by the domain's models)."""
    tables = load_domain("retail").tables
    return initial_rows(tables, json.loads(retail_seed_file.read_text()), None)


@pytest.fixture
def run_id() -> Iterator[str]:
    """A fresh run label; whatever a failing test left under it is swept afterwards."""
    run = lbl.new_id("run-it")
    yield run
    sweep(run=run)


class Exec:
    """Run commands inside containers with docker-py's exec."""

    def __init__(self, client: docker.DockerClient):
        self.client = client

    def __call__(self, container_id: str, cmd: list[str]) -> tuple[int, str]:
        res = self.client.containers.get(container_id).exec_run(cmd)
        return int(res.exit_code), res.output.decode(errors="replace").strip()

    def connect_errno(self, container_id: str, host: str, port: int) -> int:
        """errno of a TCP connect (1 s timeout) from inside a container that has python; 0 = connected."""
        code, out = self(container_id, ["python", "-c", CONNECT, host, str(port)])
        assert code == 0, out
        return int(out.splitlines()[-1])


@pytest.fixture(scope="session")
def dexec(dclient: docker.DockerClient) -> Exec:
    return Exec(dclient)


@dataclass
class Pair:
    run_id: str
    a: AttemptHandle
    b: AttemptHandle


@pytest.fixture(scope="session")
def sandbox_pair(base_images: dict[str, str], retail_rows: dict[str, list[dict[str, Any]]]) -> Iterator[Pair]:
    """Two retail sandboxes (no Typesense) started concurrently with the same seed rows,
    shared by the isolation, egress and hardening tests (session-wide: two starts in all)."""
    run = lbl.new_id("run-it-pair")
    boxes = [
        AsyncSandbox(seeded_request({"retail": retail_rows}, domains=["retail"], typesense=False, run_id=run))
        for _ in range(2)
    ]

    async def enter() -> None:
        results = await asyncio.gather(*(b.__aenter__() for b in boxes), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(b.__aexit__(None, None, None) for b in boxes))
            raise errors[0]

    async def leave() -> None:
        await asyncio.gather(*(b.__aexit__(None, None, None) for b in boxes))

    asyncio.run(enter())
    try:
        yield Pair(run, boxes[0].handle, boxes[1].handle)
    finally:
        asyncio.run(leave())
        left = leftovers(run)
        sweep(run=run)
        assert left == ([], []), f"sandbox teardown left {left}"


class Proc:
    """A subprocess whose stdout lines and stderr are collected by threads."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.popen = subprocess.Popen(
            args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.stderr.append(line)

    def wait_line(self, predicate: Callable[[str], bool], timeout: float) -> str:
        """The first stdout line satisfying `predicate` (fails on exit or timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no expected line within {timeout}s; stdout={self.stdout} stderr={self.err}")
            if line is None:
                pytest.fail(f"process exited ({self.popen.wait()}); stdout={self.stdout} stderr={self.err}")
            self.stdout.append(line)
            if predicate(line):
                return line

    def finish(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            pytest.fail(f"process still running {timeout}s later; stderr={self.err}")

    @property
    def err(self) -> str:
        return "".join(self.stderr)

    def send(self, sig: int) -> None:
        self.popen.send_signal(sig)


class Spawner:
    """Start `tbx`/python subprocesses (own process, own functools.cache'd Docker client)."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def __call__(self, args: list[str], **extra_env: str) -> Proc:
        env = {**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true", "PYTHONUNBUFFERED": "1", **extra_env}
        proc = Proc(args, env)
        self.procs.append(proc)
        return proc


@pytest.fixture
def spawn() -> Iterator[Spawner]:
    spawner = Spawner()
    yield spawner
    for proc in spawner.procs:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()


@pytest.fixture
def outside(
    dclient: docker.DockerClient, base_images: dict[str, str], run_id: str
) -> Iterator[tuple[str, int]]:
    """A listener on Docker's default (non-internal) bridge: a stand-in for "the outside"
    that we own, so the test never sends a packet beyond this machine. Yields (ip, port)."""
    container = dclient.containers.run(
        require_image("servers"),
        entrypoint=["python", "-c", LISTEN],
        detach=True,
        # Its own run label: tests check their sandbox's run for leftovers while this one lives.
        labels=lbl.labels_for(f"{run_id}-outside", lbl.new_id("att-outside"), "outside", os.getpid()),
        cap_drop=["ALL"],
        read_only=True,
        mem_limit="64m",
    )
    try:
        container.reload()
        ip = container.attrs["NetworkSettings"]["IPAddress"]
        deadline = time.monotonic() + 15
        while True:  # positive control: the host can reach it, so a failed connect below means isolation
            try:
                socket.create_connection((ip, OUTSIDE_PORT), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield ip, OUTSIDE_PORT
    finally:
        container.remove(force=True)


# ---- the demo runs tbx view and tbx compare are tested on ---------------------------------------
DEMO_AGENTS = ("oracle", "chaos")


@pytest.fixture(scope="session")
def demo_runs(tbx: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The oracle and the chaos agent on the embedded demo pack (every task, 2 repeats,
    real sandboxes): agent -> run directory, made once for every module that reads them
    (test_view_html, test_compare_html; they only read). TBX_DEMO_RUNS=ORACLE_DIR:CHAOS_DIR
    reuses two runs made by exactly these commands instead."""
    reuse = os.environ.get("TBX_DEMO_RUNS")
    if reuse:
        return dict(zip(DEMO_AGENTS, map(Path, reuse.split(":")), strict=True))
    root = tmp_path_factory.mktemp("demo-runs")
    runs = {}
    for agent in DEMO_AGENTS:
        out = root / agent
        cmd = [tbx, "run", "--dataset", str(DEMO_PACK), "--agent", agent, "--repeat", "2", "--skip-rubrics"]
        cmd += ["--concurrency", "2", "--plain", "--name", agent, "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        # 3: some attempts ended in system errors (a busy machine's container start-up);
        # they are rows too, and the tests count them apart
        assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr[-3000:]
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
        valid = [r for r in rows if not r["system_error"]]
        assert len(valid) >= 20, f"{agent}: only {len(valid)} of 30 attempts judged"
        runs[agent] = out
    return runs
