"""The per-call caps (sandbox.proxy.caps, limits in sandbox.proxy.limits): arguments over
the cap are refused before any server sees them, replies over it are cut with a marker
naming the original size, on every call path."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from sandbox import MAX_ARGUMENT_BYTES, Loss, over_the_cap, recorded_argument_text
from sandbox.proxy import calls
from sandbox.proxy.caps import (
    argument_bytes,
    capped_message,
    capped_result,
    cut_text,
    oversized_arguments,
    recorded_arguments,
)
from sandbox.proxy.limits import MAX_REPLY_BYTES
from sandbox.proxy.registered import RegisteredAttempt
from sandbox.proxy.routes import Route


def test_the_caps_leave_room_for_every_golden_call_and_stop_the_review_load() -> None:
    # golden calls: ~1 KiB of arguments, ~4 KiB of reply at most; the review: 900 KiB and 17.6 MB
    assert 4 * 1024 < MAX_ARGUMENT_BYTES < 900 * 1024
    assert 16 * 1024 < MAX_REPLY_BYTES < 17_600_000


def test_arguments_within_the_cap_pass_and_over_it_are_refused_naming_size_and_limit() -> None:
    small = {"subject": "a", "description": "x" * 100}
    assert oversized_arguments("zendesk_create_item", small) is None
    big = {"description": "é" * (MAX_ARGUMENT_BYTES // 2 + 1)}  # 2 bytes each in UTF-8
    text = oversized_arguments("zendesk_create_item", big)
    assert text is not None
    assert f"{argument_bytes(big)} bytes" in text and "limit of 64 KiB per call" in text
    assert "nothing was sent" in text
    assert recorded_arguments(small) == small
    marker = recorded_arguments(big)
    assert json.dumps(marker).count("é") == 0 and str(argument_bytes(big)) in json.dumps(marker)


def test_a_models_argument_text_over_the_cap_is_kept_as_the_same_marker() -> None:
    within = json.dumps({"description": "x" * 100})
    assert recorded_argument_text(within) == within
    assert recorded_argument_text("not json, but small") == "not json, but small"
    over = "é" * (MAX_ARGUMENT_BYTES // 2 + 1)  # as text, unparsed: 2 bytes each in UTF-8
    kept = json.loads(recorded_argument_text(over))
    size = MAX_ARGUMENT_BYTES + 2
    assert kept == {"tbx_arguments_not_recorded": f"{size} bytes, over the limit of 64 KiB per call"}
    args = {"d": "x" * size}  # the proxy's refusal and the agent side's use the same words
    assert oversized_arguments("t", args) == f"Tool call 't' refused: {over_the_cap(argument_bytes(args))}"


def test_a_cut_text_keeps_whole_characters_and_says_what_was_cut() -> None:
    text = "ü" * 100  # 200 bytes
    cut = cut_text(text, 9999, limit=51)
    head, _, marker = cut.partition("\n[tbx: ")
    assert head == "ü" * 25  # 50 bytes: the 51st would split a character
    assert "reply was 9999 bytes" in marker and "51 bytes per call" in marker


def test_a_reply_message_is_cut_to_its_text_and_keeps_its_id_and_error_flag() -> None:
    text = "r" * 5000
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"x": text},
            "isError": True,
        },
    }
    raw = len(json.dumps(message))
    cut = capped_message(message, raw, limit=1000)
    assert cut["id"] == 7 and cut["result"]["isError"] is True
    assert "structuredContent" not in cut["result"]
    shown = cut["result"]["content"][0]["text"]
    assert shown.startswith("r" * 1000) and not shown.startswith("r" * 1001)
    assert f"reply was {raw} bytes" in shown
    error = capped_message(
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "e" * 3000}}, 3100, 100
    )
    assert error["error"]["code"] == -1 and len(error["error"]["message"]) < 400
    unreadable = capped_message(None, 5000, 100)
    assert (
        unreadable["result"]["isError"] is True
        and "reply was 5000 bytes" in unreadable["result"]["content"][0]["text"]
    )


def test_the_sdk_paths_result_is_cut_the_same_way() -> None:
    small = types.CallToolResult(content=[types.TextContent(type="text", text="ok")])
    assert capped_result(small, limit=1000) is small
    big = types.CallToolResult(content=[types.TextContent(type="text", text="b" * 5000)])
    cut = capped_result(big, limit=1000)
    text = calls.text_of(cut)
    assert text.startswith("b" * 1000) and "[tbx: reply cut" in text and not cut.is_error


class _NeverCalled:
    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        raise AssertionError("a refused call reached its server")


def _attempt() -> RegisteredAttempt:
    tool = types.Tool(name="zendesk_create_item", input_schema={"type": "object"})
    attempt = RegisteredAttempt("a1", "digest", 60.0)
    attempt.routes = {
        tool.name: Route(domain="zendesk", url="http://x/mcp", headers={}, client=_NeverCalled(), tool=tool)
    }
    return attempt


async def test_an_oversized_call_is_refused_on_the_sdk_path_and_recorded_without_its_arguments() -> None:
    attempt = _attempt()
    result = await calls.forward_call(attempt, "zendesk_create_item", {"description": "x" * (900 * 1024)})
    assert result.is_error and "over the limit of 64 KiB per call" in calls.text_of(result)
    [record] = attempt.snapshot()
    assert record.outcome == "refused" and len(json.dumps(record.arguments)) < 200


async def test_after_its_own_load_brought_the_sandbox_down_every_call_reads_the_limit() -> None:
    attempt = _attempt()
    attempt.loss = Loss("sandbox gone: its server-zendesk container was OOM-killed", agent_load=True)
    assert attempt.lost() is None  # not a 503: the agent's to read
    calls.refuse_if_gone(attempt)
    result = await calls.forward_call(attempt, "zendesk_create_item", {"subject": "s"})
    text = calls.text_of(result)
    assert result.is_error and "this attempt's own tool calls drove its sandbox over a resource limit" in text
    assert "OOM-killed" in text
