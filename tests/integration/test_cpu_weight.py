"""CPU weights of real container sets (`sandbox.cpu_weight`): a set booting or
waiting in the warm pool runs at the low boot weight; the set an attempt checks
out runs at Docker's default, read back from the kernel's cgroup."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.dataset import load_benchmark
from bench.prepare import task_preparation
from sandbox import labels as lbl
from sandbox import leftovers, new_id
from sandbox.cpu_weight import BOOT_SHARES, RUNNING_SHARES
from sandbox.docker_client import docker_client
from sandbox.provider import DockerProvider
from sandbox.sandbox import SandboxRequest
from sandbox.sweeper import sweep

pytestmark = pytest.mark.docker

PACK = Path(__file__).resolve().parents[2] / "bench" / "packs" / "demo"
CPU = Path("/sys/fs/cgroup/cpu/docker")


def _shares(container_id: str) -> int:
    return int((CPU / container_id / "cpu.shares").read_text())


@pytest.mark.skipif(not CPU.is_dir(), reason="needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu/docker")
def test_pooled_sets_boot_low_and_a_checked_out_set_runs_at_the_default_weight(
    base_images: dict[str, str],
) -> None:
    bench = load_benchmark(PACK)
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
                while provider.pools["retail"].booted < 1:  # a spare for the next checkout
                    await asyncio.sleep(0.1)
                mine = set(session.containers.values())
                spare = [
                    _shares(c.id)
                    for c in docker_client().containers.list(filters={"label": f"{lbl.RUN}={run_id}"})
                    if c.id not in mine
                ]
            finally:
                await session.close()
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
