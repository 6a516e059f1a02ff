"""Stop signals for long-running commands, however they were started.

`tbx run`, `tbx conformance`, `tbx up`, `tbx proxy` and `tbx env serve` must
tear down what they started on SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, a
CI cancel, systemd) and SIGHUP (a closed terminal), also when started as a
background job of a non-interactive shell (which starts it with SIGINT
ignored: Python then installs no Ctrl-C handler at all) or under `setsid`.
Inside `stop_signals_as_interrupt()`:

- the first signal stops the command: the main task of `run_async` is
  cancelled (its `finally` blocks tear down), synchronous code gets a
  KeyboardInterrupt;
- a second signal while tearing down exits at once (`os._exit`), leaving only
  labelled containers that the next start sweeps (a repeat within
  REPEAT_GRACE of the first is the same request delivered twice);
- the exit code is 128 + the first signal's number (130 for Ctrl-C), see
  `exit_code`.

A SIGHUP that was ignored when the process started (`nohup`) stays ignored:
that is what the user asked nohup for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Wrappers deliver one stop request more than once: `timeout` and CI runners
# signal the process and then its process group. A repeat this soon after the
# first is the same request, not the user's "stop now".
REPEAT_GRACE = 0.2


@dataclass
class _StopState:
    received: int | None = None
    task: asyncio.Task[Any] | None = None
    tty_fds: tuple[int, ...] = ()
    at: float = 0.0
    loop: asyncio.AbstractEventLoop | None = None


_state = _StopState()


def received() -> int | None:
    """The first stop signal this process received, if any."""
    return _state.received


def exit_code(default: int) -> int:
    """128 + the stop signal's number once one arrived, else `default`."""
    return 128 + _state.received if _state.received else default


def _on_stop(signum: int, frame: Any) -> None:
    if _state.received is not None:
        if time.monotonic() - _state.at < REPEAT_GRACE:
            return  # the same request delivered twice (e.g. `timeout` signals the child and its group)
        os.write(
            sys.stderr.fileno(),
            f"tbx: second {signal.Signals(signum).name}: exiting now; what was not torn down "
            "is labelled and swept by the next start (or `tbx gc`)\n".encode(),
        )
        os._exit(128 + _state.received)
    _state.received, _state.at = signum, time.monotonic()
    if signum == signal.SIGHUP:
        _detach_from_closed_terminal()
    task, loop = _state.task, _state.loop
    if task is not None and loop is not None and not task.done():
        loop.call_soon_threadsafe(task.cancel)
        return
    raise KeyboardInterrupt


def _detach_from_closed_terminal() -> None:
    """After a hangup, writing to the terminal fails (EIO) and would turn a clean
    teardown into a crash: what it would print goes nowhere instead."""
    # (A hung-up terminal no longer passes isatty(): use what was a tty at the start.)
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in _state.tty_fds:
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)


@contextlib.contextmanager
def stop_signals_as_interrupt() -> Iterator[None]:
    previous: dict[int, Any] = {}
    _state.tty_fds = tuple(fd for fd in (1, 2) if os.isatty(fd))
    for sig in STOP_SIGNALS:
        current = signal.getsignal(sig)
        if sig == signal.SIGHUP and current == signal.SIG_IGN:
            continue  # nohup
        previous[sig] = signal.signal(sig, _on_stop)
    try:
        yield
    finally:
        # Once stopping, a further signal must still mean "exit now" while the
        # interpreter shuts down; otherwise the command gives the handlers back.
        if _state.received is None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)` whose main task a stop signal cancels, so the
    coroutine's own `finally` blocks tear down; then KeyboardInterrupt."""

    async def main() -> T:
        _state.task, _state.loop = asyncio.current_task(), asyncio.get_running_loop()
        try:
            return await coro
        finally:
            _state.task = _state.loop = None

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if _state.received is None:
            raise
        raise KeyboardInterrupt from None
