"""The driver side of `tbx run --ray` that needs no cluster: the image check, which
Ray errors mean a lost node, the connect refusal, the missing extra, the node line
of the progress view (the cluster itself: tests/integration/bench/run/test_ray_cluster.py)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.cli.progress import nodes_text, status_line
from bench.run.attempt import AttemptOutcome
from bench.run.daemon import DaemonGate
from bench.run.ray_executor import (
    ClusterError,
    RayExecutor,
    _probe,
    _secrets,
    check_images,
    node_lost_reason,
)
from bench.run.ray_node import NodeRunner
from sandbox import DockerUnavailableError

REPO = Path(__file__).resolve().parents[4]
DRIVER = {"postgres": "sha256:aaa", "servers": "sha256:bbb"}


def test_same_digests_on_every_node_pass() -> None:
    check_images(DRIVER, {"n1": {"digests": dict(DRIVER)}, "n2": {"digests": dict(DRIVER)}})


def test_another_build_or_a_missing_image_is_refused_naming_node_and_image() -> None:
    nodes = {
        "0123456789abcdef": {"digests": {**DRIVER, "servers": "sha256:ccc"}},
        "fedcba9876543210": {"digests": {"postgres": "sha256:aaa"}},
        "aaaaaaaaaaaa0000": {"digests": dict(DRIVER)},
    }
    with pytest.raises(ClusterError) as err:
        check_images(DRIVER, nodes)
    text = str(err.value)
    assert "refusing to mix image builds" in text
    assert "node 0123456789ab image servers: sha256:ccc (the driver has sha256:bbb)" in text
    assert "node fedcba987654 image servers: missing" in text
    assert "aaaaaaaaaaaa" not in text


def test_ray_errors_of_a_dead_node_or_worker_are_node_lost() -> None:
    ray = pytest.importorskip("ray")
    exc = ray.exceptions
    assert node_lost_reason(exc.WorkerCrashedError()) is not None
    assert node_lost_reason(exc.NodeDiedError("node 12 died")).startswith("NodeDiedError: node 12 died")
    assert node_lost_reason(exc.ActorDiedError()) is not None
    # The attempt's task died of its actor: the cause is what counts.
    wrapped = exc.RayTaskError("run_on_node", "tb", exc.ActorDiedError())
    assert node_lost_reason(wrapped) is not None
    assert node_lost_reason(exc.RayTaskError("run_on_node", "tb", ValueError("no actor"))) is None
    assert node_lost_reason(ValueError("boom")) is None


def test_an_address_nobody_listens_on_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.monotonic()
    with pytest.raises(ClusterError, match=f"127.0.0.1:{port} does not answer"):
        _probe(f"127.0.0.1:{port}", 2.0)
    assert time.monotonic() - t < 5
    with pytest.raises(ClusterError, match="not auto or HOST:PORT"):
        _probe("nonsense", 2.0)


def test_without_ray_installed_the_run_says_how_to_get_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from bench.cli.main import main\n"
        f"sys.argv = ['tbx', 'run', '--dataset', {str(REPO / 'bench/packs/demo')!r}, '--agent', 'oracle',"
        f" '--repeat', '1', '--out', {str(tmp_path / 'out')!r}, '--ray', 'auto']\n"
        "sys.exit(main())"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode != 0
    assert "pip install 'tbx[ray]'" in r.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_keys_travel_by_the_config_names_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.llm.config import ModelsConfig

    monkeypatch.setenv("TBX_TEST_AGENT_KEY", "sk-secret")
    config = ModelsConfig.model_validate(
        {
            "agent": {"model": "m", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "TBX_TEST_AGENT_KEY"},
            "judge": {"model": "j", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "TBX_TEST_JUDGE_KEY"},
        }
    )
    assert _secrets(config) == {"TBX_TEST_AGENT_KEY": "sk-secret"}  # the judge stays on the driver
    assert _secrets(None) == {}


def test_the_node_travels_in_the_outcome_json() -> None:
    o = AttemptOutcome(run_id="r", attempt_id="a", task_id="t", domain="retail", repeat=0, node="abc")
    assert AttemptOutcome.model_validate_json(o.model_dump_json()).node == "abc"


class _State:
    total = 4
    started = time.monotonic()
    phase = "attempts"
    warm_sandboxes = 0

    @property
    def nodes(self) -> dict[str, dict[str, int]] | None:
        return {"bbbb": {"running": 1, "done": 2}, "aaaa": {"running": 0, "done": 1}}

    @property
    def counts(self) -> dict[str, int]:
        return {"done": 3, "passed": 3, "failed": 0, "errors": 0, "retried": 1, "alive": 1}


def test_progress_shows_attempts_per_node_and_nodes_alive() -> None:
    assert nodes_text(_State()) == "nodes 2 alive: aaaa 0 running/1 done, bbbb 1 running/2 done"
    assert status_line(_State()).endswith("nodes 2 alive: aaaa 0 running/1 done, bbbb 1 running/2 done")

    class Local(_State):
        @property
        def nodes(self) -> dict[str, dict[str, int]] | None:
            return None

    assert nodes_text(Local()) is None
    assert "nodes" not in status_line(Local())


def test_the_config_file_can_name_the_cluster_and_it_stays_out_of_the_bundle(tmp_path: Path) -> None:
    from bench.llm.config import parse_models_config

    cfg = parse_models_config({"ray": "auto", "agent": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}})
    assert cfg.ray == "auto" and "ray" not in cfg.public_dict()  # resuming on another cluster is the same run
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "models.yaml"
    config.write_text(f"ray: 127.0.0.1:{port}\n")
    r = subprocess.run(
        [sys.executable, "-m", "bench.cli", "run", "--dataset", str(REPO / "bench/packs/demo"), "--agent",
         "oracle", "--repeat", "1", "--config", str(config), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert r.returncode != 0
    assert f"127.0.0.1:{port} does not answer" in r.stderr  # the config's address was the one tried
    assert not (tmp_path / "out" / "manifest.json").exists()


class _Daemon:
    """A node's executor as far as ping goes: its daemon answers or not."""

    def __init__(self) -> None:
        self.up = True
        self.recoveries = 0

    async def ping(self) -> None:
        if not self.up:
            raise DockerUnavailableError("cannot reach the Docker daemon (restarting)")

    async def recovered(self) -> None:
        self.recoveries += 1


class _Method:
    def __init__(self, fn: Any):
        self.fn = fn

    def remote(self) -> Any:
        return self.fn()


class _Actor:
    """An actor handle over a real NodeRunner: `handle.method.remote()` is awaitable, as a Ray ref is."""

    def __init__(self, runner: NodeRunner | None, dead: bool = False):
        self.runner, self.dead = runner, dead

    def __getattr__(self, name: str) -> _Method:
        if self.dead:
            ray = pytest.importorskip("ray")

            async def died() -> None:
                raise ray.exceptions.ActorDiedError()

            return _Method(died)
        return _Method(getattr(self.runner, name))


def _runner(daemon: _Daemon) -> NodeRunner:
    runner = NodeRunner.__new__(NodeRunner)  # no DockerProvider: the daemon is the stand-in above
    runner.executor = SimpleNamespace(sandboxes=daemon)  # type: ignore[assignment]
    return runner


async def test_ping_waits_for_a_node_whose_daemon_restarts_and_forgets_a_lost_node() -> None:
    pytest.importorskip("ray")
    a, b = _Daemon(), _Daemon()
    executor = RayExecutor()
    executor.actors = {
        "a" * 16: _Actor(_runner(a)),
        "b" * 16: _Actor(_runner(b)),
        "c" * 16: _Actor(None, True),
    }
    await executor.sandboxes.ping()  # all answer; the dead actor's node is lost, not waited for
    assert executor.lost == {"c" * 16}

    b.up = False
    with pytest.raises(RuntimeError, match=r"node bbbbbbbbbbbb: DockerUnavailableError: cannot reach"):
        await executor.sandboxes.ping()

    # The coordinator's gate: new tries wait while b's daemon is away, and go on once it is back.
    gate = DaemonGate(
        executor.sandboxes.ping,
        wait=10.0,
        on_back=executor.sandboxes.recovered,
        poll_max=0.05,
        notice=lambda _: None,
    )
    assert not await gate.answers()
    waiting = asyncio.ensure_future(gate.ready())
    await asyncio.sleep(0.2)
    assert not waiting.done(), "tries are held while a node's daemon does not answer"
    b.up = True
    await asyncio.wait_for(waiting, 5.0)
    assert gate.gone is None and a.recoveries == b.recoveries == 1
