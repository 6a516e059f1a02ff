"""CPU weights of real container sets (`sandbox.cpu_weight`): a set booting or
waiting in the warm pool runs at the low boot weight; the set an attempt checks
out runs at Docker's default, read back from the kernel's cgroup."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.prepare import task_preparation
from sandbox import (
    DockerProvider,
    Sandbox,
    SandboxRequest,
    cgroup_parent,
    docker_client,
    leftovers,
    new_id,
    sweep,
)
from sandbox import labels as lbl
from sandbox.cgroups import ROOT, TBX_PARENT, container_dirs
from sandbox.cpu_weight import BOOT_SHARES, RUNNING_SHARES

pytestmark = pytest.mark.docker

CPU = ROOT / "cpu"


def _cpu_dir(container_id: str) -> Path:
    return next(d for d, v in container_dirs(container_id, "cpu") if v == 1 and (d / "cpu.shares").is_file())


def _shares(container_id: str) -> int:
    return int((_cpu_dir(container_id) / "cpu.shares").read_text())


@pytest.mark.skipif(not CPU.is_dir(), reason="needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu")
def test_pooled_sets_boot_low_and_a_checked_out_set_runs_at_the_default_weight(
    base_images: dict[str, str],
) -> None:
    bench = load_benchmark(DEMO_PACK)
    task = next(t for t in bench.tasks if t.domain == "retail")
    prep = task_preparation(bench, task, typesense=False)
    run_id = new_id("run-it-weight")
    provider = DockerProvider(warm=2)

    async def go() -> tuple[list[int], list[int]]:
        await provider.start(run_id)
        provider.plan({"retail": 3})
        request = SandboxRequest(domains=["retail"], prepare=prep, typesense=False, run_id=run_id)
        try:
            session = await provider.checkout(request)
            try:
                held = [_shares(cid) for cid in session.containers.values()]
                pool = await provider.warm_up(request)  # the pool of the request's shape
                while pool.booted < 1:  # a spare for the next checkout
                    await asyncio.sleep(0.1)
                mine = set(session.containers.values())
                spare = [
                    _shares(c.id)
                    for c in docker_client().containers.list(filters={"label": f"{lbl.RUN}={run_id}"})
                    if c.id not in mine
                ]
            finally:
                await provider.release(session)
            return held, spare
        finally:
            await provider.close()

    try:
        held, spare = asyncio.run(go())
    finally:
        sweep(run_id)
    assert held and all(s == RUNNING_SHARES for s in held)
    assert spare and all(s == BOOT_SHARES for s in spare)
    assert leftovers(run_id) == ([], [])


@pytest.mark.skipif(not CPU.is_dir(), reason="needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu")
def test_attempt_containers_sit_under_tbx_s_parent_with_its_weight(
    base_images: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under Docker's /docker all containers together weighed one host process (sandbox.cgroup_parent).
    if docker_client().info().get("CgroupDriver") != "cgroupfs":
        pytest.skip("tbx's cgroup parent is for Docker's cgroupfs driver")
    monkeypatch.setenv(cgroup_parent.SHARES_ENV, "4096")
    monkeypatch.setattr(cgroup_parent, "_decided", {})
    bench = load_benchmark(DEMO_PACK)
    task = next(t for t in bench.tasks if t.domain == "retail")
    request = SandboxRequest(
        domains=["retail"],
        prepare=task_preparation(bench, task, typesense=False),
        typesense=False,
        run_id=new_id("run-it-parent"),
    )
    try:
        with Sandbox(request) as sb:
            assert sb.handle is not None
            ids = list(sb.handle.containers.values())
            dirs = [_cpu_dir(cid) for cid in ids]
            parents = {
                docker_client().api.inspect_container(cid)["HostConfig"]["CgroupParent"] for cid in ids
            }
    finally:
        sweep(request.run_id)
    assert parents == {"/" + TBX_PARENT}
    assert {d.parent for d in dirs} == {CPU / TBX_PARENT}
    assert int((CPU / TBX_PARENT / "cpu.shares").read_text()) == 4096
    assert leftovers(request.run_id) == ([], [])
