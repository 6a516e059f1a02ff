"""MCP tools as a model sees them, and the arguments a model writes for them.

An MCP listing entry becomes an OpenAI `tools` entry (with the scenario's
description overrides); a model's argument text becomes a JSON object that can
be sent, or a reason the model is shown instead (never an exception).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types

from bench.dataset import ScenarioTool
from sandbox import MAX_ARGUMENT_BYTES, UNICODE_PROBLEM, over_the_cap, sendable

__all__ = ["apply_overrides", "mcp_tool_to_openai", "parse_arguments"]


def mcp_tool_to_openai(tool: mcp_types.Tool | Mapping[str, Any]) -> dict[str, Any]:
    """An MCP tool (listing entry) as an OpenAI `tools` entry."""
    if isinstance(tool, mcp_types.Tool):
        name, description, schema = tool.name, tool.description, tool.input_schema
    else:
        name = tool["name"]
        description = tool.get("description")
        schema = tool.get("input_schema", tool.get("inputSchema"))
    params: dict[str, Any] = copy.deepcopy(dict(schema)) if schema else {}
    params.pop("$schema", None)
    params.setdefault("type", "object")
    if params["type"] == "object":
        params.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": name, "description": description or "", "parameters": params},
    }


def apply_overrides(
    tools: list[dict[str, Any]], scenario_tools: Sequence[ScenarioTool]
) -> list[dict[str, Any]]:
    """The scenario's client-side description overrides (a no-op when the proxy applied them)."""
    by_name = {t.name: t for t in scenario_tools}
    for tool in tools:
        fn = tool["function"]
        ov = by_name.get(fn["name"])
        if ov is None:
            continue
        if ov.override_description is not None:
            fn["description"] = ov.override_description
        props = fn["parameters"].get("properties", {})
        for arg, desc in (ov.override_arg_description or {}).items():
            if isinstance(props.get(arg), dict):
                props[arg]["description"] = desc
    return tools


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None) or (None, why the text is not a JSON object that can be sent).
    Empty text means {}. Whatever the model wrote lands here: every way it can be
    unusable is a reason for the model, never an exception."""
    if raw is None or not raw.strip():
        return {}, None
    size = len(raw.encode("utf-8", "replace"))
    if size > MAX_ARGUMENT_BYTES:
        # the tool proxy's per-call cap, applied to the text before it is parsed or sent
        return None, f"tool arguments are too large: {over_the_cap(size)}"
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return (
            None,
            f"tool arguments are not valid JSON ({exc.msg.removesuffix(' at')} at position {exc.pos})",
        )
    except RecursionError:
        return None, "tool arguments are not valid JSON (nested too deeply)"
    except ValueError as exc:  # NaN / Infinity, integers past Python's digit limit
        return None, f"tool arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"tool arguments must be a JSON object, got {type(value).__name__}"
    if not sendable(value):
        return None, UNICODE_PROBLEM
    return value, None
