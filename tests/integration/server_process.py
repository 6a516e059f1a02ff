"""A tbx server process of an integration test (`tbx session-proxy`, `tbx env serve`):
a free loopback port, the process started with its output in a log file, and its stop
by SIGTERM (killed when it does not exit within the timeout)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


STOP_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)


def default_stop_signals() -> None:
    """A child's stop signals at their defaults (a `preexec_fn`): tbx keeps a signal its
    parent ignored (`nohup`'s SIGHUP, `cmd &`'s SIGINT), so a test of how tbx stops must
    not inherit what the test runner was started with (pytest under `nohup`)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(
    args: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        args,
        cwd=cwd,
        env={**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true", **(env or {})},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def terminate(proc: subprocess.Popen[str], timeout: float) -> int:
    """SIGTERM, then SIGKILL after `timeout` s; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
