"""The per-call caps of the tool proxy (sandbox.proxy.limits): arguments too
large are refused before they reach a server, replies too large are cut before
they are relayed and recorded. Every path of a call (calls.py: SDK, fast,
direct) applies them here, so an agent reads the same refusal and the same cut
whichever way its call came.

Why cut and not refuse a reply: the call has run (a read, or a write that took
effect); what the agent may still use of its answer is the beginning, and the
marker tells it how much it did not get, so it can ask for less (a page, a filter).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from sandbox.proxy.limits import MAX_ARGUMENT_BYTES, MAX_REPLY_BYTES

__all__ = [
    "argument_bytes",
    "capped_message",
    "capped_result",
    "cut_text",
    "over_the_cap",
    "oversized_arguments",
    "recorded_argument_text",
    "recorded_arguments",
]


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def argument_bytes(arguments: Any) -> int:
    """The size of a call's arguments as the proxy sends them on: compact UTF-8 JSON.
    Lone surrogates are counted as replaced (the call is refused for them anyway)."""
    text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "replace"))


def over_the_cap(size: int, limit: int = MAX_ARGUMENT_BYTES) -> str:
    """Why arguments of `size` bytes are refused: the words every refusal of them uses."""
    return (
        f"its arguments are {size} bytes, over the limit of {_kib(limit)} per call; "
        "nothing was sent to the tool server. Send less per call."
    )


def oversized_arguments(name: str, arguments: Any, limit: int = MAX_ARGUMENT_BYTES) -> str | None:
    """The tool error text refusing a call whose arguments exceed `limit`, else None."""
    size = argument_bytes(arguments)
    if size <= limit:
        return None
    return f"Tool call '{name}' refused: {over_the_cap(size, limit)}"


def _not_recorded(size: int, limit: int) -> dict[str, str]:
    return {"tbx_arguments_not_recorded": f"{size} bytes, over the limit of {_kib(limit)} per call"}


def recorded_arguments(arguments: Any, limit: int = MAX_ARGUMENT_BYTES) -> Any:
    """What the record keeps of a refused call's arguments: a marker once they are over
    the cap (the record must not hold what the cap keeps off the server)."""
    size = argument_bytes(arguments)
    return arguments if size <= limit else _not_recorded(size, limit)


def recorded_argument_text(raw: str, limit: int = MAX_ARGUMENT_BYTES) -> str:
    """What a conversation and its trajectory keep of a model's argument text: the text,
    or once it is over the cap the same marker as JSON text. A model writing megabytes
    per call must not grow every later request to it, nor the run's records."""
    size = len(raw.encode("utf-8", "replace"))
    return raw if size <= limit else json.dumps(_not_recorded(size, limit))


def cut_text(text: str, original_bytes: int, limit: int = MAX_REPLY_BYTES) -> str:
    """The first `limit` UTF-8 bytes of `text` (never half a character) and a marker
    saying what was cut: the reply's original size."""
    head = text.encode()[:limit].decode("utf-8", "ignore")
    return (
        f"{head}\n[tbx: reply cut: the tool's reply was {original_bytes} bytes, over the limit of "
        f"{_kib(limit)} per call; shown is its text up to {_kib(limit)}. Ask for less "
        "(a filter, a smaller page).]"
    )


def _result_text(result: Any) -> str:
    items = result.get("content") if isinstance(result, dict) else None
    return "".join(
        str(c.get("text", "")) for c in items or [] if isinstance(c, dict) and c.get("type") == "text"
    )


def _cut_result(text: str, is_error: bool, kept: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tool result holding `text` as every client's schema wants it (`resultType` and all),
    with the keys of the reply it replaces that are neither content (`_meta`, ...) kept."""
    made = types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)
    result = made.model_dump(mode="json", by_alias=True, exclude_none=True)
    rest = {k: v for k, v in (kept or {}).items() if k not in ("content", "structuredContent", "isError")}
    return {**result, **rest}


def capped_message(
    message: dict[str, Any] | None, original_bytes: int, limit: int = MAX_REPLY_BYTES
) -> dict[str, Any]:
    """The JSON-RPC reply `message` (of a body of `original_bytes`, over `limit`) as the
    proxy relays it: a result's text cut (other content, structured content included,
    dropped: it cannot be cut and still be what it claims), an error's message cut, a
    body that held no message answered as a tool error."""
    request_id = message.get("id") if message is not None else None
    result = message.get("result") if message is not None else None
    error = message.get("error") if message is not None else None
    if isinstance(result, dict):
        text = cut_text(_result_text(result), original_bytes, limit)
        cut = _cut_result(text, bool(result.get("isError")), result)
        return {"jsonrpc": "2.0", "id": request_id, "result": cut}
    if isinstance(error, dict):
        text = cut_text(str(error.get("message", "")), original_bytes, limit)
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": error.get("code", -32603), "message": text},
        }
    text = cut_text("", original_bytes, limit)
    return {"jsonrpc": "2.0", "id": request_id, "result": _cut_result(text, True)}


def capped_result(result: types.CallToolResult, limit: int = MAX_REPLY_BYTES) -> types.CallToolResult:
    """`result` unchanged when its serialised form is within `limit`, else its text cut
    (the SDK path's form of `capped_message`)."""
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    size = len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace"))
    if size <= limit:
        return result
    text = cut_text(_result_text(body), size, limit)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=result.is_error)
