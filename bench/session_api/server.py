"""What one `tbx session-proxy` process holds, started and stopped with the app:
the Docker provider (warm pools), tbx's tool proxy, the golden cache, the
session table, the recorder, and the idle-expiry loop.

Start-up (images resolved, stale leftovers swept, runtime volumes) happens in
the app's lifespan, so the server listens, and `/health` answers, only once it
can take sessions; shutdown destroys every session, then the pools.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.types import ASGIApp

from bench.dataset import Benchmark
from bench.defaults import MAX_SESSIONS
from bench.run.golden import GoldenStore, servers_image_id
from bench.session_api.admission import SessionAdmission
from bench.session_api.app import SessionApi, build_app, idle_expiry
from bench.session_api.golden_cache import GoldenCache
from bench.session_api.health import DaemonProbe
from bench.session_api.limits import BodyLimits, LimitedBodies
from bench.session_api.record import Recorder
from bench.session_api.sessions import Session, SessionTable
from bench.web_guard import GuardPolicy, WebGuard
from sandbox import SANDBOX_TIMEOUTS, DockerProvider, ProxyServer, new_id
from servers.registry import server_to_domain

# Everyone's timeouts (sandbox.timeouts), but the proxy's call bound is no tighter than
# the longest session timeout a client sends (570 s for the trainer): each session's
# own `timeout` is enforced by the session table.
TIMEOUTS = SANDBOX_TIMEOUTS.model_copy(update={"call": 3600.0})


class ServeOptions(BaseModel):
    warm: int = Field(default=1, ge=0)
    record: Path | None = None
    api_key: str | None = None
    gc_minutes: float | None = Field(default=None, gt=0)  # idle expiry; None: off (the reference's default)
    gc_every: float = Field(default=60.0, gt=0)
    golden_cache: Path | None = None
    # Host/Origin checks against pages in the operator's browser. Content-Type stays
    # unchecked (the reference parses any body as JSON; its CI probes with curl -d '{}'),
    # and the bearer key is the Session API's own (its 401 body, /health exempt).
    guard: GuardPolicy = Field(default_factory=lambda: GuardPolicy(require_json=False))
    # What the server takes on (bench.session_api.admission, bench.session_api.limits).
    max_sessions: int = Field(default=MAX_SESSIONS, ge=1)
    memory_budget: int | None = Field(default=None, gt=0)  # bytes; None: available at start less the reserve
    bodies: BodyLimits = Field(default_factory=BodyLimits)


def session_proxy_app(bench: Benchmark, opts: ServeOptions) -> tuple[ASGIApp, str]:
    """The app and the run id its containers are labelled with."""
    run_id = new_id("sessapi")
    # Spec §3.6: /session_destroy answers once the session's containers are removed,
    # so a client that destroys and then counts (or creates anew) sees them gone.
    provider = DockerProvider(warm=opts.warm, teardown_inline=True, timeouts=TIMEOUTS)
    proxy = ProxyServer(call_timeout=TIMEOUTS.call)
    store = GoldenStore(bench, opts.golden_cache, image_id=servers_image_id, run_id=run_id)
    golden = GoldenCache(store, provider, run_id=run_id)
    recorder = Recorder(opts.record, bench, run_id) if opts.record is not None else None
    admission = SessionAdmission(
        opts.max_sessions,
        warm=opts.warm,
        domains=sorted(set(server_to_domain().values())),
        images=lambda: dict(provider.images),
        golden_key=golden.key,
        golden_stored=lambda key: store.path(key).exists(),
        budget_bytes=opts.memory_budget,
    )
    probe = DaemonProbe()

    async def on_closed(session: Session) -> None:
        if recorder is not None:
            await recorder.record(session, dict(provider.images))

    table = SessionTable(
        bench,
        provider,
        proxy,
        golden,
        run_id=run_id,
        images=lambda: dict(provider.images),
        on_closed=on_closed,
        admission=admission,
    )
    api = SessionApi(table, probe.problem)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if recorder is not None:
            recorder.open()
        await provider.start(run_id)
        admission.start()
        proxy.start()
        expiry = None
        if opts.gc_minutes is not None:
            expiry = asyncio.create_task(idle_expiry(table, opts.gc_minutes, opts.gc_every))
        try:
            yield
        finally:
            if expiry is not None:
                expiry.cancel()
            await table.aclose()
            await provider.close()
            proxy.close()
            await provider.sweep(run_id)
            if recorder is not None:
                recorder.close()
            probe.close()

    app = WebGuard(build_app(api, api_key=opts.api_key, lifespan=lifespan), opts.guard)
    return LimitedBodies(app, opts.bodies), run_id
