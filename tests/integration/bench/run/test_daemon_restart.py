"""The Docker daemon restarted under a running `tbx run` (issue #17), on a second
daemon of the test's own (scripts/second-dockerd.sh), never the shared one.

Restarted mid-run: the attempts in flight end in system errors that are
retried, new tries wait for the daemon (bench.run.daemon), the run completes
with every (task, repeat) exactly once, and nothing is left on the daemon.
Down for good: the run stops with a clear message and a non-zero exit code,
and the same command resumes it once the daemon is back.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import DEMO_PACK
from second_daemon import SecondDaemon, rows_by_key, tbx_command

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
REPEATS = 12  # enough work left after the first row that the restart lands mid-run


@pytest.fixture(scope="module")
def daemon() -> Iterator[SecondDaemon]:
    reason = SecondDaemon.unavailable()
    if reason:
        pytest.skip(f"needs a second Docker daemon of its own: {reason}")
    d2 = SecondDaemon()
    try:
        d2.start()
    except RuntimeError as exc:
        pytest.skip(f"a second Docker daemon could not start here: {exc}")
    yield d2
    d2.start()  # a test that failed half-way may have left it stopped
    from sandbox.docker_api import remove_container, remove_network

    client = d2.client()
    for c in client.containers.list(all=True, filters={"label": "tbx.run"}, ignore_removed=True):
        remove_container(c)
    for n in client.networks.list(filters={"label": "tbx.run"}):
        remove_network(n)
    client.close()
    d2.stop()  # its data root (and the loaded images) stays for the next session


def run_args(out: Path, cache: Path, *extra: str) -> list[str]:
    return tbx_command(
        "run",
        "--dataset",
        str(DEMO_PACK),
        "--tasks",
        TASK,
        "--agent",
        "oracle",
        "--repeat",
        str(REPEATS),
        "--concurrency",
        "2",
        # Cold boots: the warm pool's 60 s boot deadline is short on a loaded shared machine.
        "--warm",
        "0",
        "--out",
        str(out),
        "--golden-cache",
        str(cache),
        "--plain",
        # Headroom for boots that time out on a loaded shared machine (not the fault under test:
        # tries the outage failed do not count against this).
        "--max-retries",
        "4",
        *extra,
    )


def start_run(d2: SecondDaemon, args: list[str], log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(args, env=d2.env(), stdout=subprocess.DEVNULL, stderr=log.open("w"), text=True)


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def in_flight(d2: SecondDaemon, out: Path) -> bool:
    """Attempts past the golden replays (a row written) and sandboxes running."""
    return sum(rows_by_key(out / "results.jsonl").values()) >= 1 and len(d2.attempt_containers()) >= 2


def retried_lines(out: Path) -> list[dict[str, object]]:
    path = out / "errors.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(1500)  # a loaded shared machine boots sandboxes slowly
def test_restart_mid_run_completes_every_attempt_once(daemon: SecondDaemon, tmp_path: Path) -> None:
    out, cache, log = tmp_path / "run", tmp_path / "golden", tmp_path / "stderr.txt"
    proc = start_run(daemon, run_args(out, cache, "--daemon-wait", "120"), log)
    try:
        wait_for(lambda: in_flight(daemon, out) or proc.poll() is not None, 400, "attempts in flight")
        assert proc.poll() is None, log.read_text()
        daemon.restart(down_for=3.0)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = log.read_text()
    assert proc.returncode == 0, err
    assert "the Docker daemon does not answer" in err and "answers again" in err, err
    keys = rows_by_key(out / "results.jsonl")
    assert keys == {(TASK, r): 1 for r in range(REPEATS)}, keys
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["passed"] and not r["system_error"] for r in rows), rows
    retried = retried_lines(out)
    assert retried and all(line["retried"] for line in retried), retried
    assert sum(r["retries"] for r in rows) == len(retried)
    assert daemon.anything_left() == ([], [])  # labelled or not


@pytest.mark.timeout(1500)  # a loaded shared machine boots sandboxes slowly
def test_daemon_down_for_good_stops_resumable(daemon: SecondDaemon, tmp_path: Path) -> None:
    out, cache, log = tmp_path / "run", tmp_path / "golden", tmp_path / "stderr.txt"
    args = run_args(out, cache, "--daemon-wait", "8")
    proc = start_run(daemon, args, log)
    try:
        wait_for(lambda: in_flight(daemon, out) or proc.poll() is not None, 400, "attempts in flight")
        assert proc.poll() is None, log.read_text()
        daemon.stop()
        stopped = time.monotonic()
        proc.wait(timeout=300)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
        daemon.start()
    err = log.read_text()
    assert proc.returncode == 1, err
    assert "the Docker daemon has not answered for" in err and "re-run the same command" in err, err
    assert took < 200, f"the run took {took:.0f}s to give up"
    before = rows_by_key(out / "results.jsonl")
    assert len(before) < REPEATS and all(n == 1 for n in before.values()), before

    resumed = subprocess.run(args, env=daemon.env(), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    keys = rows_by_key(out / "results.jsonl")
    assert keys == {(TASK, r): 1 for r in range(REPEATS)}, keys
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["passed"] for r in rows), rows
    assert daemon.anything_left() == ([], [])  # labelled or not


PROBE = """
import socket, sys, time
host, port, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + wait
while True:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("open")
        break
    except OSError as exc:
        if time.monotonic() > deadline:
            print("blocked", exc)
            break
        time.sleep(0.5)
"""


def test_attempt_networks_on_the_second_daemon_are_closed(daemon: SecondDaemon) -> None:
    """Without its own iptables chains the second daemon's `internal` networks still
    give their containers a default route (via the bridge): what keeps them closed is
    the FORWARD rules second-dockerd.sh installs. Within one attempt network a
    container reaches its peer; from another attempt network (the same routed path as
    egress to anywhere) it does not."""
    import docker

    from sandbox import image_tag

    image = image_tag("servers")
    run = f"isolation-{os.getpid()}"
    client = daemon.client()
    networks, containers = [], []
    try:
        for i, subnet in enumerate(("10.231.250.0/27", "10.231.250.32/27")):
            networks.append(
                client.networks.create(
                    f"{run}-{i}",
                    driver="bridge",
                    internal=True,
                    labels={"tbx.run": run},
                    ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet)]),
                    options={"com.docker.network.bridge.name": f"tbx-iso{os.getpid() % 100000}{i}"},
                )
            )
        server = client.containers.run(
            image,
            entrypoint=["python", "-m", "http.server", "8080"],
            network=networks[0].name,
            labels={"tbx.run": run},
            detach=True,
        )
        containers.append(server)
        server.reload()
        ip = server.attrs["NetworkSettings"]["Networks"][networks[0].name]["IPAddress"]

        def probe(network: str, wait: float) -> str:
            return client.containers.run(
                image,
                entrypoint=["python", "-c", PROBE, ip, "8080", str(wait)],
                network=network,
                labels={"tbx.run": run},
                remove=True,
            ).decode()

        assert probe(networks[0].name, 60).startswith("open")  # its peer, on the same bridge
        assert probe(networks[1].name, 6).startswith("blocked")  # routed from another network
    finally:
        for c in containers:
            c.remove(force=True)
        for n in networks:
            n.remove()
        client.close()
