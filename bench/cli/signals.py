"""Stop signals for long-running commands.

`tbx run`, `tbx conformance`, `tbx up` and `tbx proxy` clean up on Ctrl-C. A
closed terminal (SIGHUP), `kill`, `timeout` or a CI cancel (SIGTERM) would
otherwise end the process at once and leave its containers to the next sweep;
within `stop_signals_as_interrupt()` they are turned into SIGINT, so the same
teardown runs (in asyncio code, `asyncio.run` cancels the main task as for
Ctrl-C; elsewhere KeyboardInterrupt is raised).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _forward(signum: int, frame: Any) -> None:
    signal.raise_signal(signal.SIGINT)


@contextlib.contextmanager
def stop_signals_as_interrupt() -> Iterator[None]:
    previous = {sig: signal.signal(sig, _forward) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
