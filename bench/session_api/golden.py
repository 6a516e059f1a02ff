"""Golden end states of Session API sessions: the entry's golden calls replayed
over MCP in a sandbox of its own (never the session's), cached by content.

The key hashes what the state depends on (the seeded rows, the calls, the
servers image, the canonicalisation's source), so sessions of one task share
one replay, in memory and on disk (the directory `tbx run`'s golden states use,
`$TBX_GOLDEN_CACHE` or ~/.cache/tbx/golden; same record, another key space).
`session_create` computes it concurrently with the session's own boot.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

from bench.prepare import TaskPreparation
from bench.replay.mcp_calls import replay_calls
from bench.run.golden import (
    canonical_source_hash,
    check_golden_calls,
    default_cache_dir,
    read_golden_file,
)
from bench.session_api.server_config import SessionServer
from judge.canonical import dump_dsn, state_hash
from judge.record_files import atomic_write
from judge.records import GoldenState, ToolCallView
from sandbox import SandboxProvider, SandboxRequest

log = logging.getLogger(__name__)

KEY_VERSION = "session-api-1"


def golden_key(entry: SessionServer, image_id: str) -> str:
    material = {
        "version": KEY_VERSION,
        "domain": entry.domain,
        "calls": [[tool, params] for tool, params in entry.golden_calls],
        "seed": entry.rows,
        "image": image_id,
        "canonical": canonical_source_hash(),
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


class GoldenCache:
    def __init__(
        self,
        provider: SandboxProvider,
        image_id: Callable[[], str],
        cache_dir: Path | None = None,
        run_id: str | None = None,
    ):
        self.provider = provider
        self._image_id = image_id
        self.cache_dir = cache_dir or default_cache_dir()
        self.run_id = run_id
        self._memory: dict[str, GoldenState] = {}
        self._inflight: dict[str, asyncio.Future[GoldenState]] = {}
        self.replays = 0

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json.gz"

    def _load(self, key: str) -> GoldenState | None:
        return read_golden_file(self._path(key), key)

    async def get(self, entry: SessionServer) -> GoldenState:
        key = await asyncio.to_thread(golden_key, entry, self._image_id())
        if key in self._memory:
            return self._memory[key]
        running = self._inflight.get(key)
        if running is None:
            running = asyncio.ensure_future(self._fill(key, entry))
            self._inflight[key] = running
            running.add_done_callback(lambda _: self._inflight.pop(key, None))
        # shielded: one session giving up does not cancel the replay others wait for
        return await asyncio.shield(running)

    async def _fill(self, key: str, entry: SessionServer) -> GoldenState:
        golden = await asyncio.to_thread(self._load, key)
        if golden is None:
            golden = await self._replay(key, entry)
            data = gzip.compress(golden.model_dump_json().encode(), mtime=0)
            await asyncio.to_thread(atomic_write, self._path(key), data)
        self._memory[key] = golden
        return golden

    async def _replay(self, key: str, entry: SessionServer) -> GoldenState:
        self.replays += 1
        request = SandboxRequest(
            domains=[entry.domain],
            prepare=TaskPreparation(rows={entry.domain: entry.rows}),
            # Golden calls never search policies; Typesense stays on so a warm pool this
            # request may create (pools are per domain) also serves the sessions' checkouts.
            typesense=True,
        )
        if self.run_id:
            request.run_id = self.run_id
        session = await self.provider.checkout(request)
        try:
            dsn = session.admin_dsn(entry.domain)
            initial = await asyncio.to_thread(dump_dsn, dsn, entry.domain)
            url = session.servers[entry.domain]
            records = await replay_calls(url, entry.golden_calls, dict(session.server_headers))
            final = await asyncio.to_thread(dump_dsn, dsn, entry.domain)
        finally:
            await session.close()
        calls = [
            ToolCallView.from_reply(c.tool, c.parameters, c.result, c.is_error, c.latency_ms) for c in records
        ]
        check_golden_calls(entry.server, calls)
        return GoldenState(
            task_id=entry.server,
            key=key,
            initial_state=initial,
            final_state=final,
            initial_hash=state_hash(initial),
            golden_hash=state_hash(final),
            calls=calls,
        )
