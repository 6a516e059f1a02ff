"""Admission by measured use: how many container sets fit in this machine's memory.

Docker does not reserve a container's memory limit, so summing the limits
(1.5 GiB a set) admits far fewer sets than fit. Instead tbx measures what one
live set of a domain actually holds (each container's cgroup working set after
seeding and a few tool calls), adds headroom for heavier tool calls, and
divides the machine's available memory by that.

    usage = measure_set(handle)                  # one live, seeded sandbox
    admit(concurrency=100, warm=20, per_set=usage.need_bytes)   # or AdmissionError

The measurement is cached per image tags (a rebuilt image is measured again),
so only the first run after a build pays for one throwaway sandbox per domain.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from sandbox.cache import cache_dir
from sandbox.cgroups import container_dirs
from sandbox.docker_api import docker_client
from sandbox.errors import SandboxError

MIB = 2**20
# Per set, on top of the measured working set: a model may call more and heavier
# tools than the measuring replay (large listings, searches); 10-19 golden calls
# added 1-3 % to the post-seed figure (benchmarks/density.py, all five domains).
HEADROOM_FRACTION = 0.25
HEADROOM_MIN_BYTES = 16 * MIB
# Per container, outside its cgroup: its containerd shim (PSS ~3.3 MiB) and, with
# fuse-overlayfs, its mount daemon (PSS 2-3 MiB), measured by benchmarks/density.py.
HOST_OVERHEAD_PER_CONTAINER = 8 * MIB
# Kept free for the tbx process and its proxy (~160 MiB RSS measured at concurrency 4,
# a few hundred MiB at 100) and dockerd; page cache is reclaimable and needs none.
RESERVE_FRACTION = 0.05
RESERVE_MIN_BYTES = 1024 * MIB
CGROUP_ROOT = Path("/sys/fs/cgroup")


class AdmissionError(SandboxError):
    pass


class ContainerMemory(BaseModel):
    usage: int  # what the cgroup is charged (includes reclaimable page cache)
    working_set: int  # usage minus inactive file pages: what the kernel cannot simply drop
    peak: int | None = None  # highest usage since the container started, when the kernel reports it


class SetUsage(BaseModel):
    domain: str
    containers: dict[str, ContainerMemory]  # role -> memory
    images: dict[str, str] = Field(default_factory=dict)

    @property
    def working_set(self) -> int:
        return sum(c.working_set for c in self.containers.values())

    @property
    def need_bytes(self) -> int:
        """What admission charges per set of this domain: working set, headroom, and
        what each container costs the host outside its cgroup."""
        ws = self.working_set
        host = HOST_OVERHEAD_PER_CONTAINER * len(self.containers)
        return ws + max(int(ws * HEADROOM_FRACTION), HEADROOM_MIN_BYTES) + host


class Admission(BaseModel):
    concurrency: int
    warm: int
    per_set_bytes: int
    available_bytes: int
    reserve_bytes: int
    fits: int  # sets (attempts + warm) that fit

    @property
    def sets(self) -> int:
        return self.concurrency + self.warm


# ---- measuring ----------------------------------------------------------------


def _cgroup_dirs(container_id: str) -> list[Path]:
    """Where a container's memory cgroup may live (sandbox.cgroups)."""
    return [d for d, _ in container_dirs(container_id, "memory", root=CGROUP_ROOT)]


def _stat_file(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def container_memory(container_id: str) -> ContainerMemory:
    """The container's memory as its cgroup reports it; Docker's stats API when
    the cgroup directory is not visible (rootless, remote daemon)."""
    for d in _cgroup_dirs(container_id):
        if (d / "memory.usage_in_bytes").exists():  # v1
            stat = _stat_file(d / "memory.stat")
            usage = int((d / "memory.usage_in_bytes").read_text())
            inactive = stat.get("total_inactive_file", stat.get("inactive_file", 0))
            peak_v1 = int((d / "memory.max_usage_in_bytes").read_text())
            return ContainerMemory(usage=usage, working_set=max(0, usage - inactive), peak=peak_v1)
        if (d / "memory.current").exists():  # v2
            stat = _stat_file(d / "memory.stat")
            usage = int((d / "memory.current").read_text())
            peak_file = d / "memory.peak"
            peak = int(peak_file.read_text()) if peak_file.exists() else None
            inactive = stat.get("inactive_file", 0)
            return ContainerMemory(usage=usage, working_set=max(0, usage - inactive), peak=peak)
    stats = docker_client().api.stats(container_id, stream=False, one_shot=True)
    mem = stats.get("memory_stats", {})
    usage = int(mem.get("usage", 0))
    detail = mem.get("stats", {})
    inactive = int(detail.get("total_inactive_file", detail.get("inactive_file", 0)))
    return ContainerMemory(usage=usage, working_set=max(0, usage - inactive), peak=mem.get("max_usage"))


def measure_set(domain: str, containers: dict[str, str], images: dict[str, str] | None = None) -> SetUsage:
    """Memory of one live set: `containers` is role -> container id (AttemptHandle.containers)."""
    return SetUsage(
        domain=domain,
        containers={role: container_memory(cid) for role, cid in containers.items()},
        images=dict(images or {}),
    )


# ---- cache --------------------------------------------------------------------


def _cache_dir() -> Path:
    return cache_dir("admission")


def _cache_path(domain: str, images: dict[str, str], typesense: bool) -> Path:
    key = json.dumps({"domain": domain, "images": images, "typesense": typesense}, sort_keys=True)
    return _cache_dir() / f"{domain}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def cached_usage(domain: str, images: dict[str, str], typesense: bool = True) -> SetUsage | None:
    path = _cache_path(domain, images, typesense)
    try:
        return SetUsage.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None  # not measured yet with these images (or an unreadable file): measure again


def store_usage(usage: SetUsage, typesense: bool = True) -> None:
    path = _cache_path(usage.domain, usage.images, typesense)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(usage.model_dump_json(indent=1))
    tmp.replace(path)


# ---- admitting ----------------------------------------------------------------


def available_memory() -> int:
    """MemAvailable: free memory plus what the kernel can reclaim, i.e. what new sets can
    use on a machine other work shares (MemTotal would count memory others hold)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def reserve_for(available: int) -> int:
    return max(RESERVE_MIN_BYTES, int(available * RESERVE_FRACTION))


def sets_that_fit(per_set_bytes: int, available_bytes: int) -> int:
    if per_set_bytes <= 0:
        raise ValueError("per_set_bytes must be positive")
    return max(0, (available_bytes - reserve_for(available_bytes)) // per_set_bytes)


def admit(concurrency: int, warm: int, per_set_bytes: int, available_bytes: int | None = None) -> Admission:
    """Admit `concurrency` attempts plus `warm` pooled sets, or say how many fit."""
    available = available_memory() if available_bytes is None else available_bytes
    fits = sets_that_fit(per_set_bytes, available)
    result = Admission(
        concurrency=concurrency,
        warm=warm,
        per_set_bytes=per_set_bytes,
        available_bytes=available,
        reserve_bytes=reserve_for(available),
        fits=fits,
    )
    if result.sets > fits:
        raise AdmissionError(
            f"concurrency {concurrency} with {warm} warm sandboxes is {result.sets} container sets of "
            f"~{per_set_bytes / MIB:.0f} MiB each (measured use + headroom) = "
            f"{result.sets * per_set_bytes / 2**30:.1f} GiB, but only {fits} sets fit in the "
            f"{available / 2**30:.1f} GiB available (keeping {result.reserve_bytes / 2**30:.1f} GiB free); "
            "lower --concurrency or --warm"
        )
    return result


def default_warm(
    concurrency: int, per_set_bytes: int, warm_sets_per_pool: int = 1, available_bytes: int | None = None
) -> int:
    """The warm pool size per domain when the user gives none: as large as the
    concurrency, but only with the memory the attempts leave (a pool is a
    latency aid, never a reason to refuse a run)."""
    available = available_memory() if available_bytes is None else available_bytes
    room = sets_that_fit(per_set_bytes, available) - concurrency
    return max(0, min(concurrency, room // max(1, warm_sets_per_pool)))
