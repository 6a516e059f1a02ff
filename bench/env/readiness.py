"""`GET /ready`: 200 once every component works, else 503 naming each that does not.

    dataset  loaded without problems, at least one task served
    config   a `user` role (and a `judge` role when served tasks have rubrics), keys resolvable
    docker   the daemon answers a ping
    images   the tags sandboxes run exist, with the digests the manifest recorded
    output   the output directory accepted this server's bundle (manifest written)
    pool     every served domain's warm pool holds a booted sandbox (PostgreSQL, Typesense
             and the tool server observed answering by the boot itself)
    proxy    the tool proxy answers HTTP on 127.0.0.1
    user     the user model endpoint serves chat completions: listed by `GET /models`, else
             proven by a 1-token completion (bench.env.endpoint_probe)
    judge    the same for the judge endpoint (when configured)

Checks run concurrently, each bounded by CHECK_TIMEOUT; the result is cached
for CACHE_SECONDS so polling costs nothing (one check in flight at a time).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from bench.env.endpoint_probe import ProbeCache
from bench.env.host import EnvHost
from bench.llm.config import RoleConfig
from sandbox import docker_client

CACHE_SECONDS = 1.5
CHECK_TIMEOUT = 5.0


class Component:
    def __init__(self, ok: bool, detail: str):
        self.ok, self.detail = ok, detail

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}


def _ok(detail: str = "ok") -> Component:
    return Component(True, detail)


def _fail(detail: str) -> Component:
    return Component(False, detail)


async def _dataset(host: EnvHost) -> Component:
    if host.bench.errors:
        return _fail(f"{len(host.bench.errors)} problem(s), first: {host.bench.errors[0]}")
    if not host.tasks:
        return _fail("no task selected")
    return _ok(f"{len(host.tasks)} task(s) in {', '.join(host.domains)} from {host.bench.root.name}")


async def _config(host: EnvHost) -> Component:
    if host.config_problems:
        return _fail("; ".join(host.config_problems))
    return _ok()


async def _docker(host: EnvHost) -> Component:
    try:
        await asyncio.to_thread(lambda: docker_client().ping())
    except Exception as exc:
        return _fail(str(exc))
    return _ok()


async def _images(host: EnvHost) -> Component:
    if not host.images:
        return _fail(host.bring_up_error or "image tags not resolved yet")
    recorded = (host.manifest or {}).get("image_digests") or {}

    def digests() -> dict[str, str]:
        client = docker_client()
        return {name: client.images.get(tag).id for name, tag in host.images.items()}

    try:
        now = await asyncio.to_thread(digests)
    except Exception as exc:
        return _fail(f"{exc.__class__.__name__}: {exc}")
    changed = [n for n, d in now.items() if recorded and recorded.get(n) != d]
    if changed:
        return _fail(f"images {', '.join(changed)} differ from the manifest's digests (rebuilt since start?)")
    return _ok(", ".join(sorted(host.images.values())))


async def _output(host: EnvHost) -> Component:
    if host.fatal is not None:
        return _fail(host.fatal)
    if host.manifest is None:
        return _fail(f"manifest not written yet ({host.bring_up_error or 'starting'})")
    return _ok(f"recording to {host.opts.out.name}")


async def _pool(host: EnvHost) -> Component:
    missing = [d for d in host.domains if d not in host.pools]
    if missing:
        return _fail(f"no warm pool yet for {', '.join(missing)} ({host.bring_up_error or 'starting'})")
    empty = {d: p for d, p in host.pools.items() if p.booted < 1}
    if empty:
        parts = []
        for d, p in empty.items():
            why = f"last boot failed: {p.last_error}" if p.last_error is not None else f"{p.spare} booting"
            parts.append(f"{d}: no booted sandbox ({why})")
        return _fail("; ".join(parts))
    return _ok(", ".join(f"{d}: {p.booted} booted" for d, p in sorted(host.pools.items())))


async def _proxy(host: EnvHost) -> Component:
    proxy = host.proxy
    if proxy is None or not proxy.running:
        return _fail("the tool proxy is not running")
    try:
        async with httpx.AsyncClient(timeout=CHECK_TIMEOUT) as http:
            r = await http.get(proxy.url)
    except httpx.HTTPError as exc:
        return _fail(f"{proxy.url} does not answer: {exc!r}")
    return _ok(f"{proxy.url} answers (HTTP {r.status_code} without a token)")


async def _endpoint(probes: ProbeCache, role: str, cfg: RoleConfig | None, needed: bool) -> Component:
    if cfg is None:
        return _fail(f"no {role} role configured") if needed else _ok("not configured (not needed)")
    result = await probes.check(role, cfg, CHECK_TIMEOUT)
    return Component(result.ok, result.detail)


class Readiness:
    def __init__(self, host: EnvHost):
        self.host = host
        self._cached: tuple[float, dict[str, Any]] | None = None
        self._lock = asyncio.Lock()
        self._probes = ProbeCache()

    async def report(self) -> dict[str, Any]:
        async with self._lock:
            if self._cached is not None and time.monotonic() - self._cached[0] < CACHE_SECONDS:
                return self._cached[1]
            body = await self._check()
            self._cached = (time.monotonic(), body)
            return body

    async def _check(self) -> dict[str, Any]:
        host = self.host
        needs_judge = any(t.has_rubrics for t in host.tasks.values()) and not host.opts.skip_rubrics
        checks = {
            "dataset": _dataset(host),
            "config": _config(host),
            "docker": _docker(host),
            "images": _images(host),
            "output": _output(host),
            "pool": _pool(host),
            "proxy": _proxy(host),
            "user": _endpoint(self._probes, "user", host.config.user, True),
            "judge": _endpoint(self._probes, "judge", host.config.judge, needs_judge),
        }

        async def bounded(name: str, coro: Any) -> tuple[str, Component]:
            try:
                return name, await asyncio.wait_for(coro, CHECK_TIMEOUT + 1)
            except TimeoutError:
                return name, _fail(f"no answer within {CHECK_TIMEOUT + 1:g} s")

        results = dict(await asyncio.gather(*(bounded(n, c) for n, c in checks.items())))
        failing = [n for n, c in results.items() if not c.ok]
        return {
            "ready": not failing,
            "failing": failing,
            "components": {n: c.as_dict() for n, c in results.items()},
            "episodes": {"active": len(host.episodes), "max": host.opts.max_episodes},
            # per served domain: resets served, and how many were hand-overs of a prepared sandbox
            "pools": {
                d: {"booted": p.booted, "checkouts": p.checkouts, "handovers": p.handovers}
                for d, p in sorted(host.pools.items())
            },
        }
