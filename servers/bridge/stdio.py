"""The child's stdio as an MCP transport: one JSON-RPC message per line, each
line at most `line_cap` bytes (a longer line is drained and dropped, so a
server flooding stdout costs bounded memory and the call it owes times out),
anything that is not a JSON-RPC message logged and skipped, and the child's end
reported to `on_exit` (the bridge then exits, so the container's end names it). The child
is started by the bridge's entry point, before its own imports (servers/bridge/__main__.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 16


async def read_lines(stream: Any, line_cap: int) -> AsyncIterator[bytes]:
    """Lines of `stream` (without the newline); a line over `line_cap` is dropped whole."""
    buffer = b""
    dropping = False
    async for chunk in stream:
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if len(buffer) > line_cap:
                    if not dropping:
                        log.warning("dropping a stdout line over %d bytes", line_cap)
                    dropping, buffer = True, b""
                break
            line, buffer = buffer[:end], buffer[end + 1 :]
            if dropping or len(line) > line_cap:
                if not dropping:
                    log.warning("dropping a stdout line over %d bytes", line_cap)
                dropping = False
                continue
            yield line


def exit_code(returncode: int | None) -> int:
    """The bridge's own exit code for the child's: a signal as the shell writes it."""
    if returncode is None:
        return 70
    if returncode < 0:
        return 128 - returncode
    return returncode or 70  # a server that ends by itself mid-attempt has failed


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while chunk := await reader.read(READ_CHUNK):
        yield chunk


@contextlib.asynccontextmanager
async def child_transport(
    process: subprocess.Popen[bytes],
    line_cap: int,
    on_exit: Callable[[int | None], Awaitable[None]],
) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of SessionMessages to and from the started child."""
    assert process.stdin is not None and process.stdout is not None
    loop = asyncio.get_running_loop()
    stdout = asyncio.StreamReader(limit=READ_CHUNK)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), process.stdout)
    stdin_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, process.stdin)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](16)
    closing = False

    async def exited() -> int | None:
        return await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)

    async def reader() -> None:
        async with read_writer:
            async for line in read_lines(_chunks(stdout), line_cap):
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    log.warning("skipping a stdout line that is not JSON-RPC: %r", line[:200])
                    continue
                await read_writer.send(SessionMessage(message))
            # End of stdout: the child is ending. Report it before the session sees the
            # stream close, so the exit (and its code) is what the bridge says.
            with anyio.move_on_after(2):
                code = await exited()
                if not closing:
                    await on_exit(code)

    async def writer() -> None:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin_transport.write(data.encode() + b"\n")

    async def watcher() -> None:
        code = await exited()
        if not closing:
            await on_exit(code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        tg.start_soon(watcher)
        try:
            yield read_stream, write_stream
        finally:
            closing = True
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    stdin_transport.close()
                with anyio.move_on_after(2):
                    while process.poll() is None:
                        await anyio.sleep(0.05)
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, 9)
            tg.cancel_scope.cancel()
