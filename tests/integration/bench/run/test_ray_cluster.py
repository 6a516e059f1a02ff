"""`tbx run --ray` on a real local Ray cluster: a head (no attempt slots) and two
workers with their own node ids and `tbx_attempt` slots, every node on this
machine's Docker daemon (their containers carry `tbx.node`). The driver is the
real CLI in a subprocess, like a user's `tbx run`.

One cluster serves the module (Ray is slow to start on two cores); the node-loss
test replaces the worker it kills, as a node that comes back would be. Every
process of the cluster's nodes runs with an audit hook (NODE_GUARD) that refuses
to open anything under one directory, where a test puts the driver's dataset:
the nodes must run its attempts without reading it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_support import DEMO_PACK

from bench.run.results import read_rows
from sandbox import docker_client
from sandbox.labels import NODE, RUN

ray = pytest.importorskip("ray", reason="the ray extra (pip install 'tbx[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[4]
TASKS = [
    "demo_retail.py:test_ret_expedite_headphones",
    "demo_retail.py:test_ret_defective_speaker_refund",
    "demo_retail.py:test_ret_change_of_mind_tablet",
]
NODE_ARGS: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
SLOTS = 1  # one attempt per worker: two at once, one on each (the local run's concurrency)
UNREADABLE_ENV = "TBX_TEST_NODE_UNREADABLE"

# sitecustomize.py of the nodes' processes: a path under $TBX_TEST_NODE_UNREADABLE
# cannot be opened or listed there (as on a machine without the driver's dataset);
# each process logs that it is guarded, and every refusal.
NODE_GUARD = """
import os, sys
_root = os.environ.get("TBX_TEST_NODE_UNREADABLE")
if _root:
    _root = os.path.abspath(_root)
    _here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(_here, "guarded.log"), "a") as _f:
        _f.write(f"{os.getpid()} {' '.join(getattr(sys, 'argv', []))[:300]}\\n")

    def _refuse(event, args):
        if event not in ("open", "os.listdir", "os.scandir") or not args:
            return
        path = args[0]
        if not isinstance(path, (str, bytes, os.PathLike)):
            return
        path = os.path.abspath(os.fsdecode(path))
        if path == _root or path.startswith(_root + os.sep):
            with open(os.path.join(_here, "refused.log"), "a") as f:
                f.write(f"{os.getpid()} {event} {path}\\n")
            raise PermissionError(13, "the driver's dataset is not readable on a node", path)

    sys.addaudithook(_refuse)
"""


def _env() -> dict[str, str]:
    # The driver: this repository on its path, no node guard.
    env = {**os.environ, "PYTHONPATH": str(REPO), "TESTCONTAINERS_RYUK_DISABLED": "true"}
    env.pop(UNREADABLE_ENV, None)
    return env


@pytest.fixture(scope="module")
def guard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the nodes' sitecustomize; `guard / "unreadable"` is what they cannot read."""
    root = tmp_path_factory.mktemp("node-guard")
    (root / "sitecustomize.py").write_text(NODE_GUARD)
    return root


@pytest.fixture(scope="module")
def cluster(guard: Path) -> Iterator[Cluster]:
    # Raylets (and so every worker and actor) inherit this process's environment; put back
    # afterwards, or every later test's subprocess would run the guard and the checkout's tbx.
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", UNREADABLE_ENV)}
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(guard), os.environ.get("PYTHONPATH", "")])
    os.environ[UNREADABLE_ENV] = str(guard / "unreadable")
    c = Cluster(
        initialize_head=True,
        head_node_args={**NODE_ARGS, "include_dashboard": False, "resources": {"tbx_attempt": 0}},
    )
    try:
        for _ in range(2):
            c.add_node(**NODE_ARGS, resources={"tbx_attempt": SLOTS})
        c.wait_for_nodes(timeout=120)
        yield c
    finally:
        c.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        os.environ.pop(UNREADABLE_ENV, None)


def tbx(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )


def run_args(
    out: Path, golden: Path, tasks: list[str], repeat: int, *extra: str, dataset: Path = DEMO_PACK
) -> list[str]:
    return [
        "run",
        "--dataset",
        str(dataset),
        "--tasks",
        ",".join(tasks),
        "--agent",
        "oracle",
        "--repeat",
        str(repeat),
        "--skip-rubrics",
        "--warm",
        "0",
        "--plain",
        "--out",
        str(out),
        "--golden-cache",
        str(golden),
        *extra,
    ]


def containers(**labels: str) -> list[str]:
    filters = [f"{k}={v}" for k, v in labels.items()]
    # ignore_removed: a container removed between the listing and its inspection (the
    # run tearing down) is simply not there.
    listed = docker_client().containers.list(all=True, filters={"label": filters}, ignore_removed=True)
    return [c.name for c in listed]


def verdicts(out: Path) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (r.task_id, r.repeat): (
            r.passed,
            r.system_error,
            r.signature,
            (r.model_extra or {}).get("strict_match"),
            (r.model_extra or {}).get("differences"),
        )
        for r in read_rows(out / "results.jsonl")
    }


def worker_ids(c: Cluster) -> list[str]:
    return [n.node_id for n in c.worker_nodes]


def test_cluster_run_gives_the_local_verdicts_spread_over_the_workers(
    cluster: Cluster, tmp_path: Path
) -> None:
    golden = tmp_path / "golden"
    local = tbx(*run_args(tmp_path / "local", golden, TASKS, 1, "--concurrency", "2"))
    assert local.returncode == 0, local.stderr
    remote = tbx(*run_args(tmp_path / "ray", golden, TASKS, 1, "--ray", cluster.address))
    assert remote.returncode == 0, remote.stderr
    assert "nodes 2 alive" in remote.stderr  # the progress view's node line

    assert verdicts(tmp_path / "ray") == verdicts(tmp_path / "local")
    assert len(verdicts(tmp_path / "ray")) == len(TASKS)
    rows = read_rows(tmp_path / "ray" / "results.jsonl")
    nodes = [(r.model_extra or {}).get("node") for r in rows]
    assert set(nodes) <= set(worker_ids(cluster)), "no attempt on the head (it offers no slots)"
    assert len(set(nodes)) == 2, f"attempts spread over both workers: {nodes}"
    ray_manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    local_manifest = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert ray_manifest["images"] == local_manifest["images"]
    assert containers(**{RUN: ray_manifest["run_id"]}) == []


def test_nodes_run_attempts_without_reading_the_drivers_dataset(
    cluster: Cluster, guard: Path, tmp_path: Path
) -> None:
    """The dataset is at a path no node can read (NODE_GUARD): the attempts still pass,
    since a spec carries all its attempt needs (bench.rollout.brief), and no node
    process ever tried to open it."""
    dataset = guard / "unreadable" / "demo"
    shutil.copytree(DEMO_PACK, dataset)
    out = tmp_path / "ray"
    run = tbx(*run_args(out, tmp_path / "golden", TASKS[:2], 1, "--ray", cluster.address, dataset=dataset))
    assert run.returncode == 0, run.stderr[-3000:]
    rows = read_rows(out / "results.jsonl")
    assert sorted(r.task_id for r in rows) == sorted(TASKS[:2])
    assert all(r.passed and not r.system_error for r in rows), [(r.task_id, r.system_error) for r in rows]
    assert {(r.model_extra or {}).get("node") for r in rows} <= set(worker_ids(cluster))
    # the guard was on in the nodes' workers, and it refused nothing: no node looked
    guarded = (guard / "guarded.log").read_text()
    assert "default_worker" in guarded, guarded[-2000:]
    assert not (guard / "refused.log").exists(), (guard / "refused.log").read_text()[-2000:]
    assert json.loads((out / "manifest.json").read_text())["dataset"] == str(dataset)


def test_node_lost_mid_run_is_retried_elsewhere_once_and_swept(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = run_args(out, tmp_path / "golden", TASKS[:2], 2, "--ray", cluster.address, "--max-retries", "3")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    )
    try:
        victim = None
        deadline = time.monotonic() + 400
        while victim is None and time.monotonic() < deadline and proc.poll() is None:
            for node in list(cluster.worker_nodes):
                if containers(**{NODE: node.node_id}):  # an attempt's sandbox is up there
                    victim = node
                    break
            time.sleep(0.5)
        assert victim is not None, "no attempt reached a worker"
        dead = victim.node_id
        cluster.remove_node(victim, allow_graceful=False)
        _, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        # The node comes back (a fresh node id, as a restarted machine would get).
        cluster.add_node(**NODE_ARGS, resources={"tbx_attempt": SLOTS})
        cluster.wait_for_nodes(timeout=120)
    assert proc.returncode == 0, stderr.decode()[-3000:]

    rows = read_rows(out / "results.jsonl")
    keys = [(r.task_id, r.repeat) for r in rows]
    assert sorted(keys) == sorted((t, k) for t in TASKS[:2] for k in (0, 1)), "each (task, repeat) once"
    assert all(r.passed and not r.system_error for r in rows)
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    lost = [e for e in errors if "node lost" in json.dumps(e)]
    assert lost, f"the dead node's attempts were system errors: {errors}"
    assert all(e.get("retried") for e in lost), "and every one was retried"
    retried = sum((r.model_extra or {}).get("retries", 0) for r in rows)
    assert retried >= len(lost)
    survivors = {(r.model_extra or {}).get("node") for r in rows if (r.model_extra or {}).get("retries")}
    assert dead not in survivors, "the retries ran on another node"
    run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    assert containers(**{NODE: dead}) == [], "nothing of the dead node is left"
    assert containers(**{RUN: run_id}) == []


def test_driver_sigkill_then_same_command_resumes_without_loss_or_leak(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    args = run_args(out, tmp_path / "golden", TASKS[:2], 2, "--ray", cluster.address)
    results = out / "results.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_text().strip():
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_run = json.loads((out / "manifest.json").read_text())["run_id"]
    before = results.read_text().splitlines()
    assert 1 <= len(before) < 4

    resumed = tbx(*args)
    assert resumed.returncode == 0, resumed.stderr
    rows = read_rows(results)
    assert sorted((r.task_id, r.repeat) for r in rows) == sorted((t, k) for t in TASKS[:2] for k in (0, 1))
    assert all(r.passed and not r.system_error for r in rows)
    assert results.read_text().splitlines()[: len(before)] == before
    assert containers(**{RUN: killed_run}) == [], "the killed run's containers are swept on every node"
    assert containers(**{RUN: json.loads((out / "manifest.json").read_text())["run_id"]}) == []


@pytest.fixture
def other_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second Docker daemon of this test's own (own data root, socket and default
    bridge, no iptables): another node's daemon, holding other images under tbx's tags.
    Its bridge is its own because a dockerd given --bridge=none deletes the host's
    docker0, the shared daemon's default bridge."""
    root = Path(tempfile.mkdtemp(prefix="tbx-ray-dockerd-", dir="/tmp"))
    bridge = "tbxd3br0"
    if subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0:
        subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "10.255.251.1/24", "dev", bridge], check=True)
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
    sock = root / "docker.sock"
    (root / "daemon.json").write_text("{}")  # not the shared daemon's configuration
    log = (root / "dockerd.log").open("w")
    proc = subprocess.Popen(
        [
            "dockerd",
            f"--config-file={root / 'daemon.json'}",
            "--storage-driver=vfs",
            f"--data-root={root / 'data'}",
            f"--exec-root={root / 'exec'}",
            f"--pidfile={root / 'dockerd.pid'}",
            f"--host=unix://{sock}",
            f"--bridge={bridge}",
            "--iptables=false",
            "--ip6tables=false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    host = f"unix://{sock}"
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(["docker", "-H", host, "info"], capture_output=True).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline, (root / "dockerd.log").read_text()[
                -2000:
            ]
            time.sleep(1)
        yield host
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def test_a_node_with_another_image_build_is_refused(
    cluster: Cluster, other_daemon: str, tmp_path: Path
) -> None:
    """A node whose daemon holds other images under the manifest's tags (another,
    non-reproducible build of the same commit) is refused before anything runs."""
    from sandbox import image_tag

    tiny = tmp_path / "tiny.tar"
    with tarfile.open(tiny, "w") as tar:
        info = tarfile.TarInfo("another-build")
        data = b"not the driver's build\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    for name in ("postgres", "typesense", "servers"):
        subprocess.run(
            ["docker", "-H", other_daemon, "import", str(tiny), image_tag(name)],
            check=True,
            capture_output=True,
        )
    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = other_daemon  # the new node's processes use that daemon
    try:
        odd = cluster.add_node(**NODE_ARGS, resources={"tbx_attempt": 1})
    finally:
        if saved is None:
            os.environ.pop("DOCKER_HOST")
        else:
            os.environ["DOCKER_HOST"] = saved
    try:
        cluster.wait_for_nodes(timeout=120)
        out = tmp_path / "run"
        refused = tbx(*run_args(out, tmp_path / "golden", TASKS[:1], 1, "--ray", cluster.address))
        assert refused.returncode != 0
        assert "refusing to mix image builds" in refused.stderr, refused.stderr[-2000:]
        assert f"node {odd.node_id[:12]} image servers" in refused.stderr
        for good in cluster.worker_nodes - {odd}:
            assert good.node_id[:12] not in refused.stderr
        assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text().strip()
    finally:
        cluster.remove_node(odd, allow_graceful=False)


def test_an_address_that_does_not_answer_fails_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    out = tmp_path / "run"
    t = time.monotonic()
    r = tbx(*run_args(out, tmp_path / "golden", TASKS[:1], 1, "--ray", f"127.0.0.1:{port}"), timeout=120)
    assert r.returncode != 0
    assert f"the Ray cluster at 127.0.0.1:{port} does not answer" in r.stderr
    assert time.monotonic() - t < 60
    assert not (out / "manifest.json").exists()


def test_sigterm_of_the_driver_stops_every_remote_attempt_and_leaves_no_container(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    args = run_args(out, tmp_path / "golden", TASKS, 2, "--ray", cluster.address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    )
    try:
        deadline = time.monotonic() + 400
        busy: list[str] = []
        while not busy and time.monotonic() < deadline and proc.poll() is None:
            busy = [n.node_id for n in cluster.worker_nodes if containers(**{NODE: n.node_id})]
            time.sleep(0.5)
        if not busy:
            proc.kill()
            _, err = proc.communicate(timeout=60)
            raise AssertionError(
                f"no attempt reached a worker (driver exit {proc.returncode}): {err[-3000:]!r}"
            )
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr.decode()[-2000:]
    run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    assert containers(**{RUN: run_id}) == [], "every node removed the run's containers"
    rows = read_rows(out / "results.jsonl") if (out / "results.jsonl").exists() else []
    assert len(rows) < len(TASKS) * 2 and all(r.passed for r in rows if not r.system_error)
