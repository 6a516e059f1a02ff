"""Admission measures a real live set: one seeded retail sandbox, golden calls played, cgroups read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.run.admission import admit_run, measure_domain, set_usage
from sandbox import admission as adm
from sandbox import leftovers, new_id, resolve_images

pytestmark = pytest.mark.docker


def test_measured_set_is_cached_and_admits_far_more_than_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TBX_CACHE", str(tmp_path))
    bench = load_benchmark(DEMO_PACK, strict=False)
    tasks = [t for t in bench.tasks if t.domain == "retail"]
    images = resolve_images(True)
    usage = asyncio.run(set_usage(bench, tasks, images))["retail"]
    assert set(usage.containers) == {"postgres", "typesense", "server-retail"}
    for role, mem in usage.containers.items():
        # Something real was read, and it is far below the 512 MiB limit of each container.
        assert 4 * adm.MIB < mem.working_set < 512 * adm.MIB, (role, mem)
        assert mem.working_set <= mem.usage
    assert adm.cached_usage("retail", images) == usage
    # The second call reads the cache: no sandbox (nothing with a fresh run label could appear).
    again = asyncio.run(set_usage(bench, tasks, images))["retail"]
    assert again == usage
    run = admit_run({"retail": usage}, 2, 2, available_bytes=4 * 2**30)
    assert run.admission.fits > 4 * 2**30 // (1536 * adm.MIB)  # more than the sum of the limits allowed


def test_measuring_leaves_nothing(tmp_path: Path) -> None:
    bench = load_benchmark(DEMO_PACK, strict=False)
    task = next(t for t in bench.tasks if t.domain == "retail")
    run_id = new_id("run")
    usage = asyncio.run(measure_domain(bench, task, resolve_images(True), typesense=False, run_id=run_id))
    assert set(usage.containers) == {"postgres", "server-retail"}
    containers, networks = leftovers(run_id)
    assert containers == [] and networks == []
