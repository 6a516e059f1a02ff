"""The probe the integration suite asks after a failed Docker test (daemon_probe):
it tells a daemon that answers from one that accepts connections and says nothing,
and the report it attaches says what dockerd is doing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_probe import daemon_state, unanswered

pytestmark = pytest.mark.docker


@pytest.fixture
def silent_daemon(tmp_path: Path) -> Iterator[Path]:
    """A unix socket that accepts and never answers: a daemon stuck on a lock."""
    path = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    server.close()


def test_a_daemon_that_answers_is_not_reported() -> None:
    assert unanswered() is None


def test_a_daemon_that_accepts_and_never_answers_is_reported_in_time(silent_daemon: Path) -> None:
    why = unanswered(timeout=1.0, environment={"DOCKER_HOST": f"unix://{silent_daemon}"})
    assert why is not None
    assert "did not answer within 1 s" in why


def test_no_daemon_at_the_address_is_reported(tmp_path: Path) -> None:
    why = unanswered(timeout=1.0, environment={"DOCKER_HOST": f"unix://{tmp_path / 'none.sock'}"})
    assert why is not None and "did not answer" in why and "No such file" in why


def test_the_probe_asks_the_sessions_daemon_not_a_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that points DOCKER_HOST elsewhere and fails is probed before its teardown."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'none.sock'}")
    assert unanswered() is None


def test_the_report_names_subscribers_connections_and_goroutines() -> None:
    report = daemon_state()
    assert "machine: load" in report and "GiB free" in report
    assert "GET /_ping:" in report
    assert "event subscribers" in report
    assert "connections to /var/run/docker.sock:" in report
    assert "goroutines of dockerd[" in report
