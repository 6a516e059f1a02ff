"""Play a list of tool calls against a server over MCP (streamable HTTP) and
record what came back: the shared step of conformance and golden replays."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from sandbox import upstream_client


class CallRecord(BaseModel):
    tool: str
    parameters: dict[str, Any]
    result: str
    is_error: bool
    latency_ms: float

    @property
    def error_envelope(self) -> bool:
        """True when the reply is the reference's in-band error object."""
        return self.result.startswith('{"error": ')


async def replay_calls(
    mcp_url: str, calls: Sequence[tuple[str, dict[str, Any]]], headers: Mapping[str, str] | None = None
) -> list[CallRecord]:
    """`headers` go with every request (a sandbox's server needs `handle.server_headers`)."""
    out: list[CallRecord] = []
    async with upstream_client(mcp_url, headers) as client:
        for tool, params in calls:
            t = time.perf_counter()
            res = await client.call_tool(tool, params)
            text = "".join(getattr(c, "text", "") for c in res.content)
            out.append(
                CallRecord(
                    tool=tool,
                    parameters=params,
                    result=text,
                    is_error=bool(res.is_error),
                    latency_ms=(time.perf_counter() - t) * 1000,
                )
            )
    return out
