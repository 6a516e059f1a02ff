"""The policy-search tool every domain exposes (`search_policy` in retail,
`knowledge_base_search_policy` elsewhere), backed by the attempt's Typesense."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.engine.tools import Tool, ToolContext, ToolError, ToolInput
from servers.toolsets.knowledge import SERVICE_UNAVAILABLE, PolicySearchError


class PolicySearchInput(ToolInput):
    query: str = Field(description="What to look up in the policy documents, in plain language.")
    max_results: int | None = Field(
        default=3, description="How many passages to return (1-10; empty or 0 means 3)."
    )


def _search(ctx: ToolContext, args: PolicySearchInput) -> Any:
    search = ctx.services.get("policy_search")
    if search is None:
        raise ToolError(SERVICE_UNAVAILABLE)
    try:
        return search(args.query, args.max_results)
    except PolicySearchError as exc:
        raise ToolError(str(exc)) from exc


def policy_search_tool(name: str) -> Tool:
    return Tool(
        name=name,
        description=(
            "Search the company's policy documents in natural language and return the most relevant "
            "passages, each with its source document and a relevance score."
        ),
        input_model=PolicySearchInput,
        fn=_search,
    )
