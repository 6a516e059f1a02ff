"""Admission by measured use: cgroup reading, the arithmetic, the cache, the run-level wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.run.admission import admit_run
from sandbox import MIB, AdmissionError, SetUsage
from sandbox import admission as adm
from sandbox.admission import ContainerMemory

GIB = 2**30


def _usage(domain: str, mib: int) -> SetUsage:
    per = mib * MIB // 3
    return SetUsage(
        domain=domain,
        containers={
            r: ContainerMemory(usage=per + 5 * MIB, working_set=per) for r in ("postgres", "ts", "srv")
        },
        images={"servers": "tbx/servers:abc"},
    )


def test_cgroup_v1_working_set_excludes_inactive_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "memory" / "docker" / "c1"
    d.mkdir(parents=True)
    (d / "memory.usage_in_bytes").write_text(str(100 * MIB))
    (d / "memory.max_usage_in_bytes").write_text(str(120 * MIB))
    (d / "memory.stat").write_text(f"cache 40\ntotal_inactive_file {30 * MIB}\ntotal_rss 7\n")
    monkeypatch.setattr(adm, "CGROUP_ROOT", tmp_path)
    mem = adm.container_memory("c1")
    assert mem == ContainerMemory(usage=100 * MIB, working_set=70 * MIB, peak=120 * MIB)


def test_cgroup_v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "system.slice" / "docker-c2.scope"
    d.mkdir(parents=True)
    (d / "memory.current").write_text(str(50 * MIB))
    (d / "memory.stat").write_text(f"anon 1\ninactive_file {10 * MIB}\n")
    monkeypatch.setattr(adm, "CGROUP_ROOT", tmp_path)
    assert adm.container_memory("c2") == ContainerMemory(usage=50 * MIB, working_set=40 * MIB, peak=None)


def test_need_adds_headroom() -> None:
    u = _usage("retail", 120)
    assert u.working_set == 120 * MIB
    host = 3 * adm.HOST_OVERHEAD_PER_CONTAINER  # shims and fuse-overlayfs, outside the cgroups
    assert u.need_bytes == 150 * MIB + host  # 25 %
    small = _usage("retail", 30)
    assert small.need_bytes == small.working_set + adm.HEADROOM_MIN_BYTES + host


def test_admit_counts_sets_against_available_minus_reserve() -> None:
    available = 22 * GIB
    reserve = adm.reserve_for(available)
    assert reserve == int(available * adm.RESERVE_FRACTION) > adm.RESERVE_MIN_BYTES
    fits = adm.sets_that_fit(150 * MIB, available)
    assert fits == (available - reserve) // (150 * MIB)
    ok = adm.admit(100, fits - 100, 150 * MIB, available)
    assert ok.sets == fits
    with pytest.raises(AdmissionError, match=r"only \d+ sets fit .* lower --concurrency or --warm"):
        adm.admit(100, fits - 99, 150 * MIB, available)


def test_small_machine_keeps_a_gib_free() -> None:
    assert adm.reserve_for(4 * GIB) == 1024 * MIB
    assert adm.sets_that_fit(100 * MIB, 1 * GIB) == 0


def test_cache_round_trip_keyed_by_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBX_CACHE", str(tmp_path))
    u = _usage("retail", 120)
    assert adm.cached_usage("retail", u.images) is None
    adm.store_usage(u)
    assert adm.cached_usage("retail", u.images) == u
    assert adm.cached_usage("retail", {"servers": "tbx/servers:other"}) is None  # a rebuild measures again
    assert adm.cached_usage("retail", u.images, typesense=False) is None
    next(tmp_path.joinpath("admission").glob("*.json")).write_text("{broken")
    assert adm.cached_usage("retail", u.images) is None


def test_concurrency_100_with_model_agent_is_admitted_on_24_gib() -> None:
    """The issue's goal: 100 attempts in flight fit when sets are charged what they use."""
    usage = {"retail": _usage("retail", 130)}
    run = admit_run(usage, 100, None, available_bytes=22 * GIB)
    assert run.concurrency == 100
    assert run.admission.sets <= run.admission.fits
    assert 0 < run.warm <= 100  # the default pool takes only the memory the attempts leave


def test_warm_pools_count_once_per_domain() -> None:
    usage = {"retail": _usage("retail", 100), "travel": _usage("travel", 160)}
    run = admit_run(usage, 10, 4, available_bytes=22 * GIB)
    assert run.admission.warm == 8  # two pools of 4
    assert run.admission.per_set_bytes == usage["travel"].need_bytes  # the largest set of the run
    with pytest.raises(AdmissionError, match="warm sandboxes"):
        admit_run(usage, 10, 100, available_bytes=22 * GIB)


def test_default_warm_never_refuses_a_run_that_fits_without_a_pool() -> None:
    usage = {"retail": _usage("retail", 200)}
    fits = adm.sets_that_fit(usage["retail"].need_bytes, 8 * GIB)
    run = admit_run(usage, fits, None, available_bytes=8 * GIB)
    assert run.warm == 0
    with pytest.raises(AdmissionError):
        admit_run(usage, fits + 1, None, available_bytes=8 * GIB)
