"""An OOM kill is told from what the kernel and the cgroup record, not from
Docker's `OOMKilled` flag alone (real containers, the host's real cgroups).

The flag comes from containerd's OOM event, which on cgroup v1 can come late
or never on a loaded machine (issue #29, finding 10: a CI run read "exited
with code 137" for an OOM kill). To make that case happen every time, the
container's main process is moved into a memory cgroup of its own, below the
container's, with a small limit: the kernel OOM-kills it there, the container
exits with 137, and containerd (which watches only the container's own
cgroup) never tells Docker. The kernel's log names the cgroup all the same.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from sandbox import labels as lbl
from sandbox import require_image
from sandbox.container_fate import lost_container
from sandbox.oom import CGROUP_ROOT, cgroup_oom_kills, kernel_logged_oom

pytestmark = pytest.mark.docker

# pid 1 holds ~300 MB in a shell variable: far past the 32 MiB of the sub-cgroup.
HOG = 'echo 1000 > /proc/self/oom_score_adj; sleep 3; x=$(head -c 300000000 /dev/zero | tr "\\0" a); sleep 60'


@pytest.fixture
def container(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A container running the script the test gives (indirect parametrize), else a sleep."""
    client = docker.from_env()
    c = client.containers.run(
        require_image("postgres"),
        entrypoint=["sh", "-c"],
        command=[getattr(request, "param", "sleep 120")],
        detach=True,
        mem_limit="512m",
        labels=lbl.labels_for(lbl.new_id("ootest"), lbl.new_id("oom"), "oom-test", os.getpid()),
        network_mode="none",
    )
    try:
        yield c
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            c.remove(force=True)


def _v1_memory_cgroup(cid: str) -> Path:
    group = CGROUP_ROOT / "memory" / "docker" / cid
    if not (group / "memory.oom_control").is_file() or not os.access(group, os.W_OK):
        pytest.skip(f"needs a writable cgroup v1 memory hierarchy for the container ({group})")
    return group


@pytest.mark.parametrize("container", [HOG], indirect=True)
def test_an_oom_kill_docker_never_hears_of_is_still_named(container: Any) -> None:
    container.reload()
    group = _v1_memory_cgroup(container.id)
    child = group / "tbx-test-child"
    child.mkdir()
    try:
        (child / "memory.limit_in_bytes").write_text(str(32 * 2**20))
        (child / "cgroup.procs").write_text(str(container.attrs["State"]["Pid"]))
        assert container.wait(timeout=60)["StatusCode"] == 137
        container.reload()
        assert container.attrs["State"]["OOMKilled"] is False, "Docker heard of it: the case is not made"
        assert kernel_logged_oom(container.id)
        told = lost_container({"postgres": container.id})
        assert told is not None and "was OOM-killed: it hit its memory limit of 512 MiB" in told, told
    finally:
        with contextlib.suppress(OSError):
            child.rmdir()


def test_a_sigkill_is_not_called_an_oom_kill(container: Any) -> None:
    time.sleep(0.5)
    container.kill()
    container.wait(timeout=30)
    told = lost_container({"postgres": container.id})
    assert told is not None and told.endswith("exited with code 137 (killed: SIGKILL)"), told


def test_the_cgroup_counts_the_oom_kills_of_a_running_container(container: Any) -> None:
    container.reload()
    _v1_memory_cgroup(container.id)
    assert cgroup_oom_kills(container.id) == 0
    # A process other than the main one hits the container's limit; the container lives on.
    container.exec_run(["sh", "-c", 'x=$(head -c 900000000 /dev/zero | tr "\\0" a)'])
    container.reload()
    assert container.status == "running"
    assert (cgroup_oom_kills(container.id) or 0) >= 1
    assert cgroup_oom_kills("0" * 64) is None  # no such cgroup
