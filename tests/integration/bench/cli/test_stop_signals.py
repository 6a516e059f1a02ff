"""Long-running commands stop cleanly however they were started.

Each command is started the ways users and CI start it: at a terminal (a
pty, Ctrl-C typed, the terminal closed), as a background job of a
non-interactive shell (which starts it with SIGINT ignored), under `nohup`,
under `setsid`, and under `timeout` (the signal goes to `timeout`, which
passes it on). Once it holds containers it gets a stop signal; then within 15 s
it has exited with 128 + the signal and every container and network it created
is gone. A second signal during teardown ends it within 2 s, and what is left
is labelled for the next sweep.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pg_support import DEMO_PACK
from server_process import default_stop_signals

from sandbox import docker_client, sweep
from sandbox import labels as lbl

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[4]
TASK = "demo_retail.py:test_ret_expedite_headphones"
STOP_WITHIN = 15.0
SECOND_SIGNAL_WITHIN = 2.0


@dataclass
class Started:
    """A command started one way: `pid` is whom a signal is sent to (the wrapper
    for `timeout`), `marker` finds the tbx process itself, `output` its stdout."""

    mode: str
    popen: subprocess.Popen[bytes] | None
    pid: int
    marker: str
    master_fd: int | None = None
    output: list[str] = field(default_factory=list)
    # tbx processes seen running (their labels find what they made once they are gone)
    seen: set[int] = field(default_factory=set)

    def poll(self) -> int | None:
        if self.popen is not None:
            return self.popen.poll()
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self._code = os.waitstatus_to_exitcode(status)
        return self._code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = getattr(self, "_code", None)
            if code is not None:
                return code
            code = self.poll()
            if code is not None:
                return code
            self.read_some(0.05)
        return None

    def read_some(self, wait: float) -> None:
        fd = self.master_fd if self.master_fd is not None else self._stdout_fd()
        if fd is None:
            time.sleep(wait)
            return
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if chunk:
                self.output.append(chunk.decode(errors="replace"))
            else:
                time.sleep(wait)

    def _stdout_fd(self) -> int | None:
        if self.popen is not None and self.popen.stdout is not None:
            return self.popen.stdout.fileno()
        return None

    @property
    def text(self) -> str:
        return "".join(self.output)

    def kill(self) -> None:
        for pid in tbx_pids(self.marker):
            with _gone():
                os.kill(pid, signal.SIGKILL)
        with _gone():
            os.kill(self.pid, signal.SIGKILL)
        self.wait(5)


class _gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *rest: object) -> bool:
        return kind is ProcessLookupError or kind is ChildProcessError


def tbx_pids(marker: str) -> list[int]:
    """Processes carrying this test's marker in their environment (the tbx process
    under whatever wrapper started it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        argv = cmd.split(b"\0")
        if f"TBX_TEST_MARKER={marker}".encode() in env.split(b"\0") and argv[1:3] == [b"-m", b"bench.cli"]:
            pids.append(int(entry.name))
    return pids


def owned_labels(pids: Iterable[int]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Name -> labels of the containers and of the networks whose owner is one of `pids`."""
    wanted = {str(p) for p in pids}
    client = docker_client()
    containers = {
        c.name: c.labels
        for c in client.containers.list(all=True, filters={"label": lbl.OWNER_PID}, ignore_removed=True)
        if c.labels.get(lbl.OWNER_PID) in wanted
    }
    networks = {
        n.name: n.attrs["Labels"]
        for n in client.networks.list(filters={"label": lbl.OWNER_PID})
        if n.attrs["Labels"].get(lbl.OWNER_PID) in wanted
    }
    return containers, networks


def owned(marker: str, pids: list[int] | None = None) -> tuple[list[str], list[str]]:
    """Containers and networks whose owner label is one of the marked tbx processes."""
    containers, networks = owned_labels(pids if pids is not None else tbx_pids(marker))
    return list(containers), list(networks)


def start(mode: str, args: list[str]) -> Started:
    marker = uuid.uuid4().hex
    env = {
        **os.environ,
        "TESTCONTAINERS_RYUK_DISABLED": "true",
        "PYTHONUNBUFFERED": "1",
        "TBX_TEST_MARKER": marker,
    }
    cmd = [sys.executable, "-m", "bench.cli", *args]
    if mode == "terminal":
        pid, fd = pty.fork()
        if pid == 0:  # child: session leader with the pty as its controlling terminal
            default_stop_signals()
            os.chdir(REPO)
            os.execvpe(cmd[0], cmd, env)
        return Started(mode, None, pid, marker, master_fd=fd)
    if mode == "background":
        # `cmd &` in a non-interactive shell: the job starts with SIGINT and SIGQUIT ignored.
        script = " ".join(f"'{a}'" for a in cmd) + " & wait $!"
        wrapper = ["bash", "-c", script]
    elif mode == "nohup":
        wrapper = ["nohup", *cmd]
    elif mode == "setsid":
        wrapper = ["setsid", "--wait", *cmd]
    elif mode == "timeout":
        wrapper = ["timeout", "-s", "TERM", "900", *cmd]
    else:
        raise ValueError(mode)
    # The wrapper sets what its mode sets (`nohup`: SIGHUP ignored; `&`: SIGINT, SIGQUIT).
    popen = subprocess.Popen(
        wrapper,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=default_stop_signals,
    )
    return Started(mode, popen, popen.pid, marker)


def signal_target(s: Started) -> int:
    """Where a user or CI would send the signal: the wrapper for `timeout`
    (which forwards it), the tbx process itself otherwise."""
    if s.mode == "timeout":
        return s.pid
    pids = tbx_pids(s.marker)
    assert len(pids) == 1, f"{s.mode}: expected one tbx process, found {pids}"
    return pids[0]


def wait_until(s: Started, ready: Callable[[Started], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if s.poll() is not None:
            pytest.fail(f"{s.mode}: exited before it was ready ({s.poll()}): {s.text[-3000:]}")
        if ready(s):
            s.seen.update(tbx_pids(s.marker))
            return
        s.read_some(0.2)
    pytest.fail(f"{s.mode}: not ready within {timeout}s: {s.text[-3000:]}")


def send(s: Started, sig: int) -> None:
    if s.mode == "terminal" and sig == signal.SIGINT:
        os.write(s.master_fd or -1, b"\x03")  # Ctrl-C typed at the terminal
    elif s.mode == "terminal" and sig == signal.SIGHUP:
        os.close(s.master_fd or -1)  # the terminal window closed
        s.master_fd = None
    else:
        os.kill(signal_target(s), sig)


@pytest.fixture
def started() -> Iterator[list[Started]]:
    procs: list[Started] = []
    yield procs
    for s in procs:
        pids = s.seen | set(tbx_pids(s.marker))
        s.kill()
        # Networks too: a process stopped mid-teardown (the second signal) may have
        # removed a set's containers but not yet its network.
        containers, networks = owned_labels(pids)
        for run in {labels.get(lbl.RUN) for labels in [*containers.values(), *networks.values()]} - {None}:
            sweep(run=run)


def has_containers(s: Started) -> bool:
    return bool(owned(s.marker)[0])


def up_args() -> list[str]:
    return ["up", TASK, "--dataset", str(DEMO_PACK), "--no-typesense", "--json"]


def run_args(out: Path) -> list[str]:
    return [
        "run", "--dataset", str(DEMO_PACK), "--tasks", TASK, "--agent", "oracle", "--repeat", "20",
        "--concurrency", "1", "--warm", "1", "--skip-rubrics", "--plain", "--out", str(out),
        "--golden-cache", str(out.parent / "golden"),
    ]  # fmt: skip


def check_stopped(s: Started, sig: int, pids: list[int]) -> None:
    t = time.monotonic()
    code = s.wait(STOP_WITHIN)
    took = time.monotonic() - t
    assert code is not None, (
        f"{s.mode}: still running {STOP_WITHIN}s after {signal.Signals(sig).name}: {s.text[-3000:]}"
    )
    assert code == 128 + sig, f"{s.mode}: exit code {code}, expected {128 + sig}: {s.text[-3000:]}"
    assert owned(s.marker, pids) == ([], []), f"{s.mode}: left {owned(s.marker, pids)} after {took:.1f}s"


MODES_SIGNALS = [
    ("terminal", signal.SIGINT),
    ("terminal", signal.SIGHUP),
    ("background", signal.SIGINT),
    ("background", signal.SIGTERM),
    ("nohup", signal.SIGTERM),
    ("setsid", signal.SIGHUP),
    ("timeout", signal.SIGTERM),
]


@pytest.mark.parametrize(
    ("mode", "sig"), MODES_SIGNALS, ids=lambda v: v if isinstance(v, str) else signal.Signals(v).name
)
def test_tbx_up_stops_cleanly(mode: str, sig: int, started: list[Started]) -> None:
    s = start(mode, up_args())
    started.append(s)
    wait_until(s, lambda s: '"mcp_url"' in s.text and has_containers(s), timeout=120)
    pids = tbx_pids(s.marker)
    send(s, sig)
    check_stopped(s, sig, pids)


@pytest.mark.parametrize("mode", ["terminal", "background", "setsid", "timeout"])
def test_tbx_run_stops_cleanly_and_resumes(mode: str, started: list[Started], tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = start(mode, run_args(out))
    started.append(s)
    results = out / "results.jsonl"
    wait_until(
        s, lambda s: results.exists() and results.read_text().count("\n") >= 1 and has_containers(s), 300
    )
    pids = tbx_pids(s.marker)
    sig = signal.SIGINT if mode == "terminal" else signal.SIGTERM
    send(s, sig)
    check_stopped(s, sig, pids)
    # The output is consistent and resumable: every row parses, no (task, repeat) twice.
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    keys = [(r["task_id"], r["repeat"]) for r in rows]
    assert rows and len(keys) == len(set(keys))
    assert all(r["passed"] for r in rows if not r["system_error"])


@pytest.fixture
def env_config(tmp_path: Path) -> Path:
    """A user role for `tbx env serve` (no episode runs, so nothing answers on its port)."""
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"user": {"base_url": "http://127.0.0.1:9/v1", "model": "u", "api_key": "k"}}))
    return path


def env_serve_args(config: Path, out: Path) -> list[str]:
    return [
        "env", "serve", "--dataset", str(DEMO_PACK), "--config", str(config), "--tasks", TASK,
        "--port", "0", "--warm", "1", "--skip-rubrics", "--out", str(out),
        "--golden-cache", str(out.parent / "golden"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "sig"), MODES_SIGNALS, ids=lambda v: v if isinstance(v, str) else signal.Signals(v).name
)
def test_tbx_env_serve_stops_cleanly(
    mode: str, sig: int, started: list[Started], env_config: Path, tmp_path: Path
) -> None:
    """Once its warm sandbox holds containers: the server's shutdown tears it down."""
    s = start(mode, env_serve_args(env_config, tmp_path / "env"))
    started.append(s)
    wait_until(s, lambda s: "tbx env serve:" in s.text and has_containers(s), timeout=180)
    pids = tbx_pids(s.marker)
    send(s, sig)
    check_stopped(s, sig, pids)


def test_tbx_proxy_stops_on_sigterm_under_nohup(started: list[Started]) -> None:
    s = start("nohup", ["proxy", "--json"])
    started.append(s)
    wait_until(s, lambda s: '"mcp_url"' in s.text, timeout=60)
    send(s, signal.SIGTERM)
    check_stopped(s, signal.SIGTERM, [])


def test_tbx_conformance_stops_on_sigint_as_a_background_job(started: list[Started], dataset: Path) -> None:
    args = [
        "conformance",
        "--dataset",
        str(dataset),
        "--traces",
        str(dataset / "traces"),
        "--domain",
        "retail",
    ]
    s = start("background", [*args, "--concurrency", "1"])
    started.append(s)
    wait_until(s, has_containers, timeout=180)
    pids = tbx_pids(s.marker)
    send(s, signal.SIGINT)
    check_stopped(s, signal.SIGINT, pids)


def test_second_signal_exits_at_once_leaving_only_labelled_items(
    started: list[Started], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    args = run_args(out)
    args[args.index("--concurrency") + 1] = args[args.index("--warm") + 1] = "2"
    s = start("setsid", args)
    started.append(s)
    wait_until(s, lambda s: len(owned(s.marker)[0]) >= 4, timeout=300)
    target = signal_target(s)
    os.kill(target, signal.SIGTERM)
    time.sleep(0.4)  # teardown under way (a repeat sooner counts as the same request)
    os.kill(target, signal.SIGTERM)
    t = time.monotonic()
    code = s.wait(SECOND_SIGNAL_WITHIN + 1.0)
    assert code is not None and time.monotonic() - t <= SECOND_SIGNAL_WITHIN + 0.5, s.text[-2000:]
    # Exited 128+15 from the handler, or (the teardown already done) died of the
    # signal during interpreter shutdown, where Python restores default handlers.
    assert code in (128 + signal.SIGTERM, -signal.SIGTERM), s.text[-2000:]
    # Whatever is left carries the run's labels, so the next start's sweep finds it.
    containers, networks = owned_labels([target])
    for name, labels in {**containers, **networks}.items():
        assert labels.get(lbl.RUN) and labels.get(lbl.ATTEMPT), name
