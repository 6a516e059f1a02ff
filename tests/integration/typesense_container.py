"""The tbx Typesense image for the integration tests and a container of it run hardened.

The image: built from images/typesense/ (prepare.sh into a temporary context, then
docker build), tagged by the content hash of that directory so later runs reuse it.
Containers carry the label tbx.run=test-typesense, publish no ports (reached on their
bridge IP) and are removed by their test."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from docker.models.containers import Container

from sandbox import labels as lbl
from servers.toolsets.knowledge import make_client

REPO = Path(__file__).resolve().parents[2]
IMAGE_DIR = REPO / "images/typesense"
RUN_LABEL = "test-typesense"


def container_labels() -> dict[str, str]:
    """tbx.run plus the creation time and owner pid, so that a concurrent tbx
    sweep of stale/orphaned items leaves our live containers alone."""
    return {
        lbl.RUN: RUN_LABEL,
        lbl.CREATED: str(int(time.time())),
        lbl.OWNER_PID: str(os.getpid()),
        lbl.ROLE: "typesense",
    }


TEST_REPO = "tbx-test/typesense"
UID = 10002

# --------------------------------------------------------------------------- image


def _image_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in IMAGE_DIR.iterdir() if p.is_file()):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_typesense_image(client: docker.DockerClient) -> str:
    """Build images/typesense/ the way `tbx images build` does (prepare.sh CTX, docker build CTX)."""
    tag = f"{TEST_REPO}:{_image_hash()}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory(prefix="tbx-typesense-ctx.") as ctx:
        for path in IMAGE_DIR.iterdir():
            if path.is_file():
                shutil.copy2(path, ctx)
        subprocess.run(["bash", str(IMAGE_DIR / "prepare.sh"), ctx], check=True)
        client.images.build(path=ctx, tag=tag, rm=True, forcerm=True)
    return tag


# --------------------------------------------------------------------------- containers


@dataclass
class Running:
    container: Container
    ip: str
    api_key: str
    seconds_to_healthy: float

    @property
    def url(self) -> str:
        return f"http://{self.ip}:8108"

    def client(self, **kwargs: Any) -> Any:
        return make_client(self.url, self.api_key, **kwargs)


def _health(ip: str) -> bytes | None:
    try:
        with urllib.request.urlopen(f"http://{ip}:8108/health", timeout=1) as resp:
            return bytes(resp.read())
    except OSError:
        return None


def start_hardened(
    dclient: docker.DockerClient, image: str, env: dict[str, str] | None = None, timeout: float = 30.0
) -> Running:
    api_key = "test-" + os.urandom(8).hex()
    container = dclient.containers.create(
        image,
        detach=True,
        labels=container_labels(),
        environment={"TYPESENSE_API_KEY": api_key, **(env or {})},
        read_only=True,
        tmpfs={"/data": f"rw,nosuid,nodev,noexec,size=128m,uid={UID},gid={UID}"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="512m",
        memswap_limit="512m",
        pids_limit=256,
    )
    try:
        t0 = time.perf_counter()
        container.start()
        container.reload()
        ip = next(
            n["IPAddress"] for n in container.attrs["NetworkSettings"]["Networks"].values() if n["IPAddress"]
        )
        while (_health(ip) or b"").replace(b" ", b"") != b'{"ok":true}':
            if time.perf_counter() - t0 > timeout:
                logs = container.logs(tail=30).decode(errors="replace")
                pytest.fail(f"typesense not healthy after {timeout}s:\n{logs}")
            time.sleep(0.01)
        return Running(container, ip, api_key, time.perf_counter() - t0)
    except BaseException:
        container.remove(force=True)
        raise
