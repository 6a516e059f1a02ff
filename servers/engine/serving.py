"""The HTTP server a domain's MCP app runs under (uvicorn, tuned for a set that
mostly waits)."""

from __future__ import annotations

import asyncio

import uvicorn

__all__ = ["SecondTickServer"]


class SecondTickServer(uvicorn.Server):
    """uvicorn's server with its housekeeping tick once a second instead of ten times.

    Why: the tick (the cached Date header, the exit check) woke an idle server ten
    times a second, most of its ~2 ms of CPU per second; a set lives tens of seconds
    in the warm pool and while its agent waits for the model. The Date header has a
    resolution of a second anyway, and an exit is seen within one (tbx removes
    containers with a kill, not by waiting for it)."""

    async def main_loop(self) -> None:
        # counter 0: on_tick does its once-a-second work (the Date header) every time
        while not await self.on_tick(0):
            await asyncio.sleep(1.0)
