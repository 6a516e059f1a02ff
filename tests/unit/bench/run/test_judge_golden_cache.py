"""The golden end-state cache: one replay per key (also under concurrency),
reuse from disk, invalidation by seed and image digest, loud failure of a
golden call that errors. `bench.replay.sandboxed.replay_task` is replaced by a counter
that serves the reference's golden state (no sandbox)."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import bench.replay.sandboxed as replay_mod
import bench.run.golden as golden_mod
from bench.dataset import Benchmark, Task, load_benchmark
from bench.prepare import initial_state
from bench.replay.mcp_calls import CallRecord
from bench.replay.sandboxed import ReplayOutcome
from bench.run.golden import GoldenNotCached, GoldenReplayError, GoldenStore
from judge import State, canonical_state, state_hash
from servers.registry import load_domain

TASK = "sandbox_external_retail_group1.py:test_case_ST002_003"


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


class FakeReplay:
    def __init__(self, dataset: Path, error_at: int | None = None):
        self.dataset = dataset
        self.calls: list[str] = []
        self.error_at = error_at

    async def __call__(self, bench: Benchmark, task: Task, calls: Any = None, **kw: Any) -> ReplayOutcome:
        assert calls is None  # the golden calls of the task
        self.calls.append(task.id)
        await asyncio.sleep(0.05)  # let concurrent callers pile up
        initial: State = canonical_state(load_domain(task.domain).tables, initial_state(bench, task))
        gz = self.dataset / "traces/canonical_states" / (task.id.replace(":", "__") + ".json.gz")
        final: State = json.loads(gzip.decompress(gz.read_bytes()))
        records = [
            CallRecord(
                tool=c.tool or "",
                parameters=dict(c.parameters),
                result='{"ok": true}',
                is_error=False,
                latency_ms=1.0,
            )
            for c in bench.effective_init(task).golden_tool_interactions
        ]
        if self.error_at is not None:
            records[self.error_at] = records[self.error_at].model_copy(
                update={
                    "result": json.dumps(
                        {"error": "Tool execution failed: nope", "tool": records[self.error_at].tool}
                    )
                }
            )
        return ReplayOutcome(task_id=task.id, initial_state=initial, final_state=final, calls=records)


@pytest.fixture
def fake(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> FakeReplay:
    """The replay, replaced by a counter serving the reference's golden state."""
    replay = FakeReplay(dataset)
    monkeypatch.setattr(replay_mod, "replay_task", replay)
    return replay


async def test_cache_replays_once_and_invalidates(
    bench: Benchmark, fake: FakeReplay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = bench.task(TASK)

    store = GoldenStore(bench, tmp_path, image_id="sha256:img-1")
    first, *others = await asyncio.gather(*(store.get(task) for _ in range(4)))
    assert fake.calls == [TASK]  # concurrent requests for one key share a replay
    assert all(o is first for o in others)
    assert first.golden_hash == state_hash(first.final_state) and first.initial_hash != first.golden_hash
    assert [c.tool for c in first.calls] == bench.effective_init(task).golden_tools
    assert store.path(first.key).is_file()

    # A second computation (new process, same inputs) replays nothing.
    again = await GoldenStore(bench, tmp_path, image_id="sha256:img-1").get(task)
    assert fake.calls == [TASK]
    assert again == first

    # A new servers image invalidates it.
    rebuilt = await GoldenStore(bench, tmp_path, image_id="sha256:img-2").get(task)
    assert len(fake.calls) == 2 and rebuilt.key != first.key

    # So does a change of the seeded rows.
    real = golden_mod.initial_state

    def changed_seed(b: Benchmark, t: Task) -> dict[str, list[dict[str, Any]]]:
        rows = real(b, t)
        name = next(n for n, r in rows.items() if r)
        rows[name] = rows[name][1:]
        return rows

    monkeypatch.setattr(golden_mod, "initial_state", changed_seed)
    reseeded = await GoldenStore(bench, tmp_path, image_id="sha256:img-1").get(task)
    assert len(fake.calls) == 3 and reseeded.key not in (first.key, rebuilt.key)


async def test_preload_holds_what_the_cache_has_and_replays_nothing(
    bench: Benchmark, fake: FakeReplay, tmp_path: Path
) -> None:
    task = bench.task(TASK)
    cold = GoldenStore(bench, tmp_path, image_id="i")
    assert await cold.preload(task) is False and fake.calls == []  # not cached: no replay
    computed = await cold.get(task)

    store = GoldenStore(bench, tmp_path, image_id="i")
    assert await store.preload(task) is True
    store.path(computed.key).unlink()  # what get() returns now comes from memory
    assert (await store.get(task)) == computed and fake.calls == [TASK]


async def test_unreadable_cache_file_is_recomputed(
    bench: Benchmark, fake: FakeReplay, tmp_path: Path
) -> None:
    task = bench.task(TASK)
    g = await GoldenStore(bench, tmp_path, image_id="i").get(task)
    GoldenStore(bench, tmp_path, image_id="i").path(g.key).write_bytes(b"not gzip")
    store = GoldenStore(bench, tmp_path, image_id="i")
    assert (await store.get(task)) == g and store.replays == 1 and len(fake.calls) == 2


async def test_uncached_without_replay(bench: Benchmark, tmp_path: Path) -> None:
    store = GoldenStore(bench, tmp_path, image_id="i", allow_replay=False)
    with pytest.raises(GoldenNotCached, match=TASK.split(":")[1]):
        await store.get(bench.task(TASK))


async def test_failing_golden_call_fails_loudly(
    bench: Benchmark, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_mod, "replay_task", FakeReplay(dataset, error_at=2))
    task = bench.task(TASK)
    tool = bench.effective_init(task).golden_tools[2]
    store = GoldenStore(bench, tmp_path, image_id="i")
    with pytest.raises(GoldenReplayError, match=rf"call 2 {tool}\(.*error reply.*nope"):
        await store.get(task)
    assert not list(tmp_path.rglob("*.json.gz"))  # nothing cached


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TBX_GOLDEN_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert golden_mod.default_cache_dir() == tmp_path / "tbx/golden"
    monkeypatch.setenv("TBX_GOLDEN_CACHE", str(tmp_path / "g"))
    assert golden_mod.default_cache_dir() == tmp_path / "g"
