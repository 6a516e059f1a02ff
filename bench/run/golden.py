"""Golden end states: a task's golden tool calls replayed over MCP in a fresh
sandbox of their own (never the attempt's), cached on disk by content hash.

    store = GoldenStore(bench)                 # $TBX_GOLDEN_CACHE, else sandbox.cache_dir("golden")
    golden = await store.get(task)             # GoldenState(initial_state, final_state, hashes, calls)

The cache key hashes everything the golden state depends on: the task id and
domain, its golden calls (effective init), the seeded rows (domain seed +
data_patch), the image id of the servers image and the source of the host-side
canonicalisation. A run of k attempts of a task replays its golden once;
concurrent requests for one key in a process share a single replay. Files
live under a directory per servers-image build (`image-<id>/`), so `tbx gc`
drops the sets of builds that no longer exist (`prune_golden`).

Two key spaces share the store's directory, layout, reader and pruning: a
benchmark task's (`golden_key`, what `tbx run`, `tbx env serve` and regrade
look up) and a Session API `server_config` entry's (`session_golden_key`: no
task id, since a harness's entry need not be a benchmark task;
bench.session_api.golden_cache fills it with `GoldenStore.load`/`save`).

A golden call that returns a tool error (the in-band error envelope or an MCP
error) fails the task's preparation with `GoldenReplayError` (the reference
only logs it), unless a container of the replay's set was dead by then: that
is the set's loss (`SandboxGoneError`, bench.replay.sandboxed), and a replay
whose set is lost is played again in a new one, up to REPLAY_TRIES sets, so a
container killed under a golden replay costs no attempt a try.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import bench.replay.sandboxed as replay_mod
from bench.dataset import Benchmark, Task
from bench.prepare import initial_state
from bench.replay.sandboxed import ReplayOutcome, replay_in_sandbox
from judge import GoldenState, ToolCallView, atomic_write, canonical_source_hash, state_hash
from sandbox import (
    ContainerLostError,
    DockerProvider,
    Fault,
    SandboxGoneError,
    SandboxProvider,
    SandboxRequest,
    cache_dir,
)

log = logging.getLogger(__name__)

CACHE_ENV = "TBX_GOLDEN_CACHE"
CACHE_VERSION = 1  # the task key space's
SESSION_KEY_VERSION = "session-api-1"  # the Session API key space's (never equal to a task's)
REPLAY_TRIES = 3  # sets one golden replay may lose (killed under it) before its error stands


class GoldenReplayError(RuntimeError):
    """A golden call failed: the task cannot be judged."""

    fault = Fault("golden replay", retryable=False)  # a new try replays the same calls


class GoldenNotCached(LookupError):
    """The golden state is not in the cache and replays are not allowed."""

    fault = Fault("golden replay", retryable=False)


IMAGE_DIR_PREFIX = "image-"


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else cache_dir("golden")


def image_dir(image_id: str) -> str:
    """The directory of one servers-image build's golden states."""
    return IMAGE_DIR_PREFIX + re.sub(r"[^a-zA-Z0-9]+", "-", image_id.removeprefix("sha256:"))[:16]


def prune_golden(existing_image_ids: set[str], root: Path | None = None) -> list[str]:
    """Remove the golden sets of servers-image builds that no longer exist (their
    directories under `root`, default the default cache); returns the removed names.
    Files of the layout before per-build directories cannot be told apart and stay."""
    root = root if root is not None else default_cache_dir()
    keep = {image_dir(i) for i in existing_image_ids}
    removed = []
    for d in sorted(root.glob(IMAGE_DIR_PREFIX + "*")) if root.is_dir() else []:
        if d.is_dir() and d.name not in keep:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


def servers_image_id() -> str:
    """The image id (sha256 digest) of the servers image sandboxes run now."""
    from sandbox import docker_client, require_image

    image_id: str = docker_client().images.get(require_image("servers")).id
    return image_id


def read_golden_file(path: Path, key: str) -> GoldenState | None:
    """A cached golden state stored under `key`, or None when missing, unreadable or
    inconsistent (another key, or a final state that no longer hashes to its hash)."""
    try:
        golden = GoldenState.model_validate_json(gzip.decompress(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable golden cache file %s: %s", path, exc)
        return None
    if golden.key != key or state_hash(golden.final_state) != golden.golden_hash:
        log.warning("ignoring inconsistent golden cache file %s", path)
        return None
    return golden


def _content_key(material: dict[str, Any]) -> str:
    """The one hash of both key spaces: their material plus the canonicalisation's source."""
    material = {**material, "canonical": canonical_source_hash()}
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def golden_key(
    task: Task, calls: list[tuple[str, dict[str, Any]]], seeded_rows: dict[str, Any], image_id: str
) -> str:
    """A benchmark task's key."""
    return _content_key(
        {
            "version": CACHE_VERSION,
            "task": task.id,
            "domain": task.domain,
            "server": task.server,
            "calls": [[tool, params] for tool, params in calls],
            "seed": seeded_rows,
            "image": image_id,
        }
    )


def session_golden_key(
    domain: str, calls: list[tuple[str, dict[str, Any]]], rows: dict[str, Any], image_id: str
) -> str:
    """A Session API entry's key: what its state depends on, whichever session sent it."""
    return _content_key(
        {
            "version": SESSION_KEY_VERSION,
            "domain": domain,
            "calls": [[tool, params] for tool, params in calls],
            "seed": rows,
            "image": image_id,
        }
    )


def check_golden_calls(task_id: str, calls: list[ToolCallView]) -> None:
    for i, call in enumerate(calls):
        if call.failed:
            how = "an MCP error" if call.is_error else "an error reply"
            raise GoldenReplayError(
                f"golden replay of {task_id} failed: call {i} {call.tool}"
                f"({json.dumps(call.arguments, sort_keys=True)[:300]}) returned {how}: {call.result[:500]}"
            )


def golden_state(label: str, key: str, outcome: ReplayOutcome) -> GoldenState:
    """The golden state of a replay of golden calls (the one builder of every key space);
    `GoldenReplayError` when a call failed."""
    calls = [
        ToolCallView.from_reply(c.tool, c.parameters, c.result, c.is_error, c.latency_ms)
        for c in outcome.calls
    ]
    check_golden_calls(label, calls)
    return GoldenState(
        task_id=label,
        key=key,
        initial_state=outcome.initial_state,
        final_state=outcome.final_state,
        initial_hash=state_hash(outcome.initial_state),
        golden_hash=state_hash(outcome.final_state),
        calls=calls,
    )


class GoldenStore:
    """Golden end states, computed on demand and cached: in memory, on disk, and one
    replay per key at a time in this process (callers of one key share it; one giving
    up does not cancel it for the others). Both key spaces: a benchmark task's (`get`)
    and any other replay's under a key its caller computed (`replayed`)."""

    def __init__(
        self,
        bench: Benchmark,
        cache_dir: Path | str | None = None,
        *,
        image_id: str | Callable[[], str] | None = None,
        allow_replay: bool = True,
        runtime: str | None = None,
        run_id: str | None = None,
        provider: SandboxProvider | None = None,
    ):
        self.bench = bench
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self._image_id = image_id
        self.allow_replay = allow_replay
        self.runtime = runtime
        self.run_id = run_id
        # Where replays' sandboxes come from (None: cold sets of their own, never an
        # attempt pool's spares, which are prepared for the attempts to come).
        self.provider = provider
        self._memory: dict[str, GoldenState] = {}
        self._inflight: dict[str, asyncio.Future[GoldenState | None]] = {}
        self._keys: dict[str, str] = {}  # task id -> key (the benchmark and the image do not change)
        self.replays = 0  # golden replays this store ran

    def image_id(self) -> str:
        if callable(self._image_id):
            self._image_id = self._image_id()
        if self._image_id is None:
            self._image_id = servers_image_id()
        return self._image_id

    def key(self, task: Task) -> str:
        # Asked at every attempt's start; building the seed rows and hashing them is not free.
        key = self._keys.get(task.id)
        if key is None:
            key = self._keys[task.id] = golden_key(
                task, self.bench.golden_calls(task), initial_state(self.bench, task), self.image_id()
            )
        return key

    def path(self, key: str) -> Path:
        return self.cache_dir / image_dir(self.image_id()) / key[:2] / f"{key}.json.gz"

    def load(self, key: str) -> GoldenState | None:
        p = self.path(key)
        if not p.exists():
            # Written before the per-build directories (the key covers the build: still valid).
            p = self.cache_dir / key[:2] / f"{key}.json.gz"
        return read_golden_file(p, key)

    def save(self, golden: GoldenState) -> None:
        atomic_write(self.path(golden.key), gzip.compress(golden.model_dump_json().encode(), mtime=0))

    async def get(self, task: Task) -> GoldenState:
        golden = await self._get(task, replay=self.allow_replay)
        if golden is None:
            raise GoldenNotCached(f"golden state of {task.id} is not cached in {self.cache_dir}")
        return golden

    async def preload(self, task: Task) -> bool:
        """Hold `task`'s golden state in memory if the cache has it (no replay): a server
        loads them before its first attempts instead of during them. False: not cached."""
        return await self._get(task, replay=False) is not None

    async def replayed(
        self,
        key: str,
        label: str,
        request: SandboxRequest,
        calls: Sequence[tuple[str, dict[str, Any]]],
        *,
        provider: SandboxProvider | None = None,
    ) -> GoldenState:
        """The golden state of `calls` played on `request`'s sandbox, stored under `key`
        (computed by the caller over everything the state depends on); `provider`: where
        this replay's sandbox comes from (default the store's)."""

        async def replay() -> GoldenState:
            outcome = await replay_in_sandbox(
                provider or self._provider(), request, calls, label=f"golden replay of {label}"
            )
            return golden_state(label, key, outcome)

        golden = await self._cached(key, replay)
        assert golden is not None  # a compute is given
        return golden

    async def _get(self, task: Task, *, replay: bool) -> GoldenState | None:
        key = await asyncio.to_thread(self.key, task)

        async def compute() -> GoldenState:
            outcome = await replay_mod.replay_task(
                self.bench, task, provider=self._provider(), runtime=self.runtime, run_id=self.run_id
            )
            return golden_state(task.id, key, outcome)

        return await self._cached(key, compute if replay else None)

    async def _cached(
        self, key: str, compute: Callable[[], Awaitable[GoldenState]] | None
    ) -> GoldenState | None:
        """From memory, else the cache file, else `compute` (when given) saved to the
        cache; None when none of them has it. One look-up per key at a time."""
        while True:
            if key in self._memory:
                return self._memory[key]
            running = self._inflight.get(key)
            if running is None:
                running = asyncio.ensure_future(self._fill(key, compute))
                self._inflight[key] = running
                running.add_done_callback(lambda _: self._inflight.pop(key, None))
            golden = await asyncio.shield(running)
            if golden is not None or compute is None:
                return golden
            # A look-up that may not replay ran for this key and found nothing: ours may.

    async def _fill(
        self, key: str, compute: Callable[[], Awaitable[GoldenState]] | None
    ) -> GoldenState | None:
        golden = await asyncio.to_thread(self.load, key)
        if golden is None:
            if compute is None:
                return None
            golden = await self._replay(compute)
            await asyncio.to_thread(self.save, golden)
        self._memory[key] = golden
        return golden

    async def _replay(self, compute: Callable[[], Awaitable[GoldenState]]) -> GoldenState:
        """`compute`, again in a new set while the replay's set is lost under it (a container
        killed, the daemon restarting): nothing of a replay outlives its set, so another
        costs nothing but its time, and no attempt loses a try to it (issue 38). A failed
        golden call with the set intact stays the task's GoldenReplayError."""
        for n in range(1, REPLAY_TRIES + 1):
            self.replays += 1
            try:
                return await compute()
            except (SandboxGoneError, ContainerLostError) as exc:
                if n == REPLAY_TRIES:
                    raise
                log.warning(
                    "%s; that sandbox is lost, replaying in another (%d of %d)", exc, n + 1, REPLAY_TRIES
                )
        raise AssertionError("unreachable")

    def _provider(self) -> SandboxProvider:
        if self.provider is None:
            self.provider = DockerProvider()
        return self.provider
