"""Golden end states of Session API sessions: the entry's golden calls replayed
over MCP in a sandbox of its own (never the session's), cached by content.

The key (bench.run.golden.session_golden_key) hashes what the state depends on
(the seeded rows, the calls, the servers image, the canonicalisation's source),
so sessions of one task share one replay, in memory and on disk. On disk it is
a second key space of `tbx run`'s GoldenStore: the same directory
(`$TBX_GOLDEN_CACHE` or ~/.cache/tbx/golden), per-build layout, reader and
`tbx gc` pruning. `session_create` computes it concurrently with the session's
own boot.
"""

from __future__ import annotations

import asyncio
import logging

from bench.prepare import TaskPreparation
from bench.replay.mcp_calls import replay_calls
from bench.run.golden import GoldenStore, check_golden_calls, session_golden_key
from bench.session_api.server_config import SessionServer
from judge.canonical import dump_dsn, state_hash
from judge.records import GoldenState, ToolCallView
from sandbox import SandboxProvider, SandboxRequest

log = logging.getLogger(__name__)


class GoldenCache:
    """The golden states of the sessions' entries: replayed here, stored in `store`."""

    def __init__(self, store: GoldenStore, provider: SandboxProvider, run_id: str | None = None):
        self.store = store
        self.provider = provider
        self.run_id = run_id
        self._memory: dict[str, GoldenState] = {}
        self._inflight: dict[str, asyncio.Future[GoldenState]] = {}
        self.replays = 0

    def key(self, entry: SessionServer) -> str:
        return session_golden_key(entry.domain, entry.golden_calls, entry.rows, self.store.image_id())

    async def get(self, entry: SessionServer) -> GoldenState:
        key = await asyncio.to_thread(self.key, entry)
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
        golden = await asyncio.to_thread(self.store.load, key)
        if golden is None:
            golden = await self._replay(key, entry)
            await asyncio.to_thread(self.store.save, golden)
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
