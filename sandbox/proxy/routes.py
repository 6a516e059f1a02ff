"""An attempt's tool table: which upstream serves each tool it may call, in
allow-list order, with the scenario's description overrides applied.
Reserved tools (`__reserved__*`) are never routed."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types

from sandbox.proxy.models import ProxyError, ToolPolicy, Upstream

RESERVED_PREFIX = "__reserved__"


def apply_overrides(
    tool: types.Tool, description: str | None, arg_descriptions: Mapping[str, str] | None
) -> types.Tool:
    if description is None and not arg_descriptions:
        return tool
    update: dict[str, Any] = {}
    if description is not None:
        update["description"] = description
    if arg_descriptions:
        schema = copy.deepcopy(dict(tool.input_schema))
        props = schema.get("properties") or {}
        for arg, text in arg_descriptions.items():
            if arg in props and isinstance(props[arg], dict):
                props[arg]["description"] = text
        update["input_schema"] = schema
    return tool.model_copy(update=update)


class ToolCaller(Protocol):
    """What the SDK path calls a tool through: an `mcp.Client`, or one connected on first use."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult: ...


@dataclass
class Route:
    domain: str
    url: str
    headers: dict[str, str]  # sent upstream on every request
    client: ToolCaller
    tool: types.Tool  # as listed to the agent (overrides applied)
    interface: str | None = None  # the host device connections to `url` are bound to (Upstream.interface)


def build_routes(
    attempt_id: str,
    listed: Sequence[tuple[str, Upstream, ToolCaller, types.Tool]],
    policy: ToolPolicy,
) -> dict[str, Route]:
    """The attempt's tool table, in allow-list order (else upstream order)."""
    by_name: dict[str, list[tuple[str, Upstream, ToolCaller, types.Tool]]] = {}
    for entry in listed:
        if not entry[3].name.startswith(RESERVED_PREFIX):
            by_name.setdefault(entry[3].name, []).append(entry)
    allowed, overrides, arg_overrides = policy.allowed_tools, policy.overrides, policy.arg_overrides
    names = list(by_name) if allowed is None else list(dict.fromkeys(allowed))
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ProxyError(f"attempt {attempt_id}: allow-listed tools no upstream offers: {missing}")
    clashes = {n: [entry[0] for entry in by_name[n]] for n in names if len(by_name[n]) > 1}
    if clashes:
        raise ProxyError(f"attempt {attempt_id}: tools offered by more than one upstream: {clashes}")
    unknown = sorted((set(overrides) | set(arg_overrides)) - set(names))
    if unknown:
        raise ProxyError(f"attempt {attempt_id}: overrides for tools that are not listed: {unknown}")
    routes: dict[str, Route] = {}
    for name in names:
        domain, upstream, client, tool = by_name[name][0]
        routes[name] = Route(
            domain,
            upstream.url,
            dict(upstream.headers),
            client,
            apply_overrides(tool, overrides.get(name), arg_overrides.get(name)),
            upstream.interface,
        )
    return routes
