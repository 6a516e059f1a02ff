"""Hosting for the tool proxy: ASGI apps served by uvicorn on sockets bound
to 127.0.0.1, on one event loop in a background thread, plus the thread hop
that lets blocking callers run coroutines on that loop. Knows nothing of
attempts (that is `sandbox.proxy.registry.AttemptRegistry`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import uvicorn

from sandbox.proxy.models import ProxyError

HOST = "127.0.0.1"
STOP_TIMEOUT = 7.0
T = TypeVar("T")


def listen(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:`port` (0: any free port)."""
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only then (else +40 ms per request).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ProxyError(
            f"cannot listen on {HOST}:{port} ({exc}); pick another port or 0 for any free one"
        ) from exc
    return sock


class LoopHost:
    """`start()` serves each (app, socket) and returns once all listen; `stop()`
    runs the given teardown on the loop, then stops the servers and the thread."""

    def __init__(self, name: str = "tbx-proxy"):
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[uvicorn.Server] = []
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._stopped = False
        self._on_exit: Callable[[], Awaitable[None]] | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopped

    def cpu_time(self) -> float:
        """CPU seconds the loop's thread has used so far (for overhead measurements)."""
        if self._thread is None or self._thread.ident is None:
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))

    def start(
        self,
        served: Sequence[tuple[Any, socket.socket]],
        on_exit: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`on_exit` runs on the loop after the servers stopped (whatever stopped them)."""
        if self._thread is not None:
            raise ProxyError("proxy already started")
        self._on_exit = on_exit
        self._thread = threading.Thread(target=self._run, args=(list(served),), name=self.name, daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise ProxyError(f"proxy failed to start: {self._start_error}") from self._start_error

    def _run(self, served: list[tuple[Any, socket.socket]]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(served))
        except BaseException as exc:  # surfaced by start()
            self._start_error = exc
        finally:
            self._started.set()
            with contextlib.suppress(Exception):
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.wait(pending, timeout=2) if pending else asyncio.sleep(0))
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            for _, sock in served:
                sock.close()

    async def _serve(self, served: list[tuple[Any, socket.socket]]) -> None:
        for app, _ in served:
            config = uvicorn.Config(
                app,
                lifespan="off",
                access_log=False,
                log_level="warning",
                ws="none",
                timeout_graceful_shutdown=2,
            )
            self._servers.append(uvicorn.Server(config))
        tasks = [
            asyncio.create_task(srv.serve(sockets=[sock]))
            for srv, (_, sock) in zip(self._servers, served, strict=True)
        ]
        while not all(srv.started for srv in self._servers):
            done = [t for t in tasks if t.done()]
            if done:
                await done[0]  # raises the start-up error
                raise ProxyError("the HTTP server stopped during start-up")
            await asyncio.sleep(0.005)
        self._started.set()
        await asyncio.gather(*tasks)
        if self._on_exit is not None:
            await self._on_exit()

    def stop(self, before: Callable[[], Awaitable[None]] | None = None) -> None:
        """Run `before` on the loop, then stop serving and join the thread. Idempotent."""
        if self._stopped or self._thread is None:
            self._stopped = True
            return
        loop = self._loop
        if loop is not None and self._start_error is None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
                asyncio.run_coroutine_threadsafe(self._shutdown(before), loop).result(timeout=STOP_TIMEOUT)
        self._stopped = True
        self._thread.join(timeout=STOP_TIMEOUT + 3)

    async def _shutdown(self, before: Callable[[], Awaitable[None]] | None) -> None:
        if before is not None:
            await before()
        for srv in self._servers:
            srv.should_exit = True

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop (from any other thread)."""
        if self._loop is None or self._stopped or not self._started.is_set() or self._start_error is not None:
            coro.close()
            raise ProxyError("proxy is not running (call start() or use `with ProxyServer() as proxy:`)")
        if threading.current_thread() is self._thread:
            coro.close()
            raise ProxyError("the blocking proxy API cannot be used from the proxy's own thread")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)
