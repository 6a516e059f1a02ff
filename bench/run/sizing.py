"""How many attempts a machine takes at once: the default concurrency of
`tbx run` and `tbx env serve` (cores and memory), and the memory admission of a
run by measured use (bench.run.admission) before it starts."""

from __future__ import annotations

import asyncio
import os

from bench.dataset import Benchmark, Task
from bench.run.errors import NotEnoughMemory

MEMORY_PER_ATTEMPT_GIB = 1.5  # postgres + typesense + server limits, with headroom


def _memory_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return None


def default_concurrency(model_agent: bool = False) -> int:
    """Attempts at once. Built-in agents keep the CPU busy (sandbox boots dominate,
    ~3.5 CPU-s per attempt): one per core. A model agent mostly waits on its
    endpoint, so memory is the bound: each attempt and each warm sandbox holds
    three containers (MEMORY_PER_ATTEMPT_GIB), half of it kept for the warm pool,
    capped at 8 so a small machine's boots do not fall behind."""
    cores = os.cpu_count() or 2
    mem_gib = _memory_gib() or 8.0
    by_memory = int(mem_gib // MEMORY_PER_ATTEMPT_GIB)
    if model_agent:
        return max(1, min(8, by_memory // 2))
    return max(1, min(cores, by_memory // 2))


def check_memory(
    bench: Benchmark, tasks: list[Task], concurrency: int, warm: int | None, runtime: str | None = None
) -> int:
    """Admit the run by measured use (bench.run.admission): one live set per domain is
    measured once per image build; returns the warm pool size per domain (`warm=None`:
    the largest that fits, up to the concurrency). Raises NotEnoughMemory with the reason."""
    from bench.run.admission import admit_run, set_usage
    from sandbox import AdmissionError, resolve_images

    try:
        images = resolve_images(True)
        usage = asyncio.run(set_usage(bench, tasks, images, runtime=runtime))
        return admit_run(usage, concurrency, warm).warm
    except AdmissionError as exc:
        raise NotEnoughMemory(str(exc)) from exc
