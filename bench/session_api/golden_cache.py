"""Golden end states of Session API sessions: the entry's golden calls replayed
over MCP in a sandbox of their own (never the session's), cached by content.

The key (bench.run.golden.session_golden_key) hashes what the state depends on
(the seeded rows, the calls, the servers image, the canonicalisation's source),
so sessions of one task share one replay, in memory and on disk. It is the
second key space of `tbx run`'s GoldenStore, which does the replay, the caching
and the sharing of one replay between sessions: the same directory
(`$TBX_GOLDEN_CACHE` or ~/.cache/tbx/golden), per-build layout, reader and
`tbx gc` pruning. `session_create` computes it concurrently with the session's
own boot.
"""

from __future__ import annotations

import asyncio

from bench.prepare import TaskPreparation
from bench.run.golden import GoldenStore, session_golden_key
from bench.session_api.server_config import SessionServer
from judge import GoldenState
from sandbox import SandboxProvider, SandboxRequest


class GoldenCache:
    """The golden states of the sessions' entries, from `store`, replayed on `provider`."""

    def __init__(self, store: GoldenStore, provider: SandboxProvider, run_id: str | None = None):
        self.store = store
        self.provider = provider
        self.run_id = run_id

    @property
    def replays(self) -> int:
        return self.store.replays

    def key(self, entry: SessionServer) -> str:
        return session_golden_key(entry.domain, entry.golden_calls, entry.rows, self.store.image_id())

    async def get(self, entry: SessionServer) -> GoldenState:
        key = await asyncio.to_thread(self.key, entry)
        request = SandboxRequest(
            domains=[entry.domain],
            prepare=TaskPreparation(rows={entry.domain: entry.rows}),
            # Golden calls never search policies; Typesense stays on so the request has the
            # sessions' shape and the provider's warm pool serves it too.
            typesense=True,
        )
        if self.run_id:
            request.run_id = self.run_id
        return await self.store.replayed(
            key, entry.server, request, entry.golden_calls, provider=self.provider
        )
