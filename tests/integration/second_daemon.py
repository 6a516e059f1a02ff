"""A Docker daemon of the tests' own (scripts/second-dockerd.sh), for faults that
restart a daemon: the shared one is never touched. Used by
tests/integration/bench/run/test_daemon_restart.py, test_soak.py and benchmarks/soak.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import docker

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "second-dockerd.sh"
# An address range of its own: the two daemons do not see each other's networks.
SUBNETS = "10.231.0.0/16"


class SecondDaemon:
    def __init__(self, directory: Path | None = None):
        self.dir = directory or Path(os.environ.get("TBX_D2_DIR", "/tmp/tbx-d2"))
        self.host = f"unix://{self.dir}/docker.sock"

    @staticmethod
    def unavailable() -> str | None:
        """Why a second daemon cannot run here (None: it can)."""
        if os.geteuid() != 0:
            return "a second dockerd needs root"
        if shutil.which("dockerd") is None:
            return "dockerd is not installed"
        return None

    def _script(self, cmd: str, timeout: float = 600) -> None:
        proc = subprocess.run(
            ["bash", str(SCRIPT), cmd, str(self.dir)], capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(f"second-dockerd.sh {cmd}: {proc.stderr.strip() or proc.stdout.strip()}")

    def start(self) -> None:
        self._script("start")

    def stop(self) -> None:
        self._script("stop", timeout=120)

    def restart(self, down_for: float = 2.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host, timeout=60)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DOCKER_HOST": self.host,
            "TBX_SUBNET_RANGE": os.environ.get("TBX_D2_SUBNETS", SUBNETS),
            "TESTCONTAINERS_RYUK_DISABLED": "true",
            "PYTHONPATH": str(ROOT),
        }

    def tbx_leftovers(self) -> tuple[list[str], list[str]]:
        client = self.client()
        try:
            containers = [
                c.name
                for c in client.containers.list(all=True, filters={"label": "tbx.run"}, ignore_removed=True)
            ]
            networks = [n.name for n in client.networks.list(filters={"label": "tbx.run"})]
        finally:
            client.close()
        return containers, networks

    def anything_left(self) -> tuple[list[str], list[str]]:
        """Every container and network on this daemon, labelled or not, but its
        built-in networks: the daemon is ours alone, so anything here is a leak."""
        client = self.client()
        try:
            containers = [c.name for c in client.containers.list(all=True, ignore_removed=True)]
            networks = [n.name for n in client.networks.list() if n.name not in ("host", "none", "bridge")]
        finally:
            client.close()
        return containers, networks

    def attempt_containers(self) -> list[Any]:
        """Running tbx containers (attempts' and golden replays')."""
        client = self.client()
        try:
            return list(
                client.containers.list(
                    filters={"label": "tbx.attempt", "status": "running"}, ignore_removed=True
                )
            )
        finally:
            client.close()


def tbx_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.cli", *args]


def rows_by_key(results: Path) -> Counter[tuple[str, int]]:
    """(task id, repeat) -> how many rows results.jsonl holds for it."""
    import json

    keys: Counter[tuple[str, int]] = Counter()
    if results.exists():
        for line in results.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # blank, or the line being written right now (read mid-run)
            keys[(row["task_id"], row["repeat"])] += 1
    return keys
