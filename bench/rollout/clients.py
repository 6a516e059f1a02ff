"""Client lifetimes: the model clients shared between attempts, and one MCP session."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.llm.client import LLMClient
from bench.llm.config import ModelsConfig
from sandbox import MCP_HTTP_TIMEOUT, client_ssl_context

__all__ = ["AgentClients", "mcp_client"]


@contextlib.asynccontextmanager
async def mcp_client(url: str, headers: Mapping[str, str] | None = None) -> AsyncIterator[Client]:
    """An MCP client session on `url`, sending `headers` with every request."""
    if headers:
        async with (
            httpx2.AsyncClient(
                headers=dict(headers), timeout=MCP_HTTP_TIMEOUT, verify=client_ssl_context()
            ) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client
    else:
        async with Client(url) as client:
            yield client


@dataclass
class AgentClients:
    """Model clients to share between attempts (one connection pool per role)."""

    agent: LLMClient | None = None
    user: LLMClient | None = None

    @staticmethod
    def from_config(config: ModelsConfig, *, user: bool = True) -> AgentClients:
        return AgentClients(
            agent=LLMClient(config.role("agent"), role="agent"),
            user=LLMClient(config.role("user"), role="user") if user else None,
        )

    async def aclose(self) -> None:
        for c in (self.agent, self.user):
            if c is not None:
                await c.aclose()
