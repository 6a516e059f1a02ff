"""uvicorn under tbx's stop rules (bench.cli.signals), for `tbx env serve`.

uvicorn shuts down gracefully on SIGINT and SIGTERM (the app's shutdown tears
the open episodes down) and then re-raises the signal to die of it. tbx's
commands instead stop the same way on SIGHUP too (a closed terminal; not when
`nohup` ignores it) and exit with 128 + the signal, whatever started them; a
second signal (not the same one delivered twice) exits at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from bench.cli.signals import REPEAT_GRACE, STOP_SIGNALS


class GracefulServer(uvicorn.Server):
    """`run()`, then `stopped_by`: the first stop signal (None: it was not stopped)."""

    stopped_by: int | None = None
    _at = 0.0

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {}
        for sig in STOP_SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue  # nohup
            previous[sig] = signal.signal(sig, self._stop)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, signum: int, frame: Any) -> None:
        if self.stopped_by is None:
            self.stopped_by, self._at = signum, time.monotonic()
            self.should_exit = True
        elif time.monotonic() - self._at >= REPEAT_GRACE:
            # "Stop now": what is not torn down is labelled, the next start sweeps it.
            os._exit(128 + self.stopped_by)
