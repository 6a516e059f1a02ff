"""Is the Docker daemon still answering? Asked after an integration test fails, so
that a daemon that stopped answering is reported once, with what it was doing
(scripts/dockerd-state.py), and the session stops, rather than every later test
failing on its own 60 s (or 600 s) timeout until CI's time limit cuts the run off
with no cause printed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

REPO = Path(__file__).resolve().parents[2]
PROBE_TIMEOUT = 30.0  # seconds one API call of the probe may take on a loaded machine
UNANSWERED_BEFORE_STOP = 2  # failed tests after which an unanswering daemon stops the session
# The session's daemon, as the session began: a test may point DOCKER_HOST elsewhere
# (a second daemon, a fake socket) until its teardown, after the probe has run.
SESSION_DOCKER_ENV = {k: v for k, v in os.environ.items() if k.startswith("DOCKER_")}


def unanswered(timeout: float = PROBE_TIMEOUT, environment: Mapping[str, str] | None = None) -> str | None:
    """Why the daemon does not answer (a ping, a listing, an inspect: the last takes a
    container's lock, which a stuck operation holds), or None when it does.
    `environment`: the DOCKER_* variables naming it (default: the session's)."""
    env = dict(SESSION_DOCKER_ENV if environment is None else environment)
    # docker-py reads os.environ for an empty mapping, so the default address goes in
    env.setdefault("DOCKER_HOST", "unix:///var/run/docker.sock")
    start = time.monotonic()
    client = None
    try:
        client = docker.from_env(timeout=timeout, environment=env)  # asks the API version
        client.ping()
        listed = client.api.containers(all=True, limit=1)
        if listed:
            client.api.inspect_container(listed[0]["Id"])
    except docker.errors.NotFound:
        return None  # removed in between: it answered
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return f"the Docker daemon did not answer within {time.monotonic() - start:.0f} s: {exc}"
    finally:
        if client is not None:
            client.close()
    return None


def daemon_state() -> str:
    """scripts/dockerd-state.py's report (bounded in time, as a stuck daemon needs)."""
    try:
        proc = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "dockerd-state.py")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return "scripts/dockerd-state.py did not finish within 120 s"
    return proc.stdout + proc.stderr
