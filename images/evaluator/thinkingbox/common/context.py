"""`TestContext`: what a test function receives as `x` (spec §5)."""

from __future__ import annotations

from typing import Any

from .chat_types import Message, Text, ToolCall, ToolCallResponse, ToolResponse, message_from_json

__all__ = ["NIL_SESSION", "TestContext"]

NIL_SESSION = "00000000-0000-0000-0000-000000000000"


class TestContext:
    """The attempt as a test sees it. A plain object: tests may set attributes."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        response: str = "",
        tool_direct_responses: list[str] | None = None,
        effects: dict[str, Any] | None = None,
        tool_calls: list[ToolCallResponse] | None = None,
        messages: list[Message] | None = None,
        init_result: dict[str, Any] | None = None,
        session_id: str = NIL_SESSION,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.response = response
        self.tool_direct_responses = list(tool_direct_responses or [])
        self.effects: dict[str, Any] = effects if effects is not None else {}
        self.tool_calls = list(tool_calls or [])
        self.messages = list(messages or [])
        self.init_result: dict[str, Any] = init_result if init_result is not None else {}
        self.session_id = session_id
        self.metadata: dict[str, Any] = metadata if metadata is not None else {}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TestContext:
        calls = []
        for entry in obj.get("tool_calls") or []:
            call = message_from_json(entry["tool_call"])
            reply = message_from_json(entry["tool_response"])
            assert isinstance(call, ToolCall) and isinstance(reply, ToolResponse)
            calls.append(ToolCallResponse(call, reply))
        return cls(
            response=obj.get("response", ""),
            tool_direct_responses=obj.get("tool_direct_responses") or [],
            effects=obj.get("effects") or {},
            tool_calls=calls,
            messages=[message_from_json(m) for m in obj.get("messages") or []],
            init_result=obj.get("init_result") or {},
            session_id=obj.get("session_id") or NIL_SESSION,
            metadata=obj.get("metadata") or {},
        )

    def _dialogue(self) -> list[Text]:
        return [
            m
            for m in self.messages
            if isinstance(m, Text)
            and m.role in ("user", "assistant")
            and m.tag != "think"
            and not m.metadata.get("is_dummy")
        ]

    def transcript(self, limit: int = 0) -> str:
        """The user-visible dialogue, `User: ...` / `Assistant: ...` entries joined by a
        blank line; `limit` > 0 keeps the tail from the limit-th last assistant entry."""
        if limit < 0:
            raise ValueError("limit must be >= 0")
        entries = self._dialogue()
        if limit:
            seen = 0
            start = 0
            for i in range(len(entries) - 1, -1, -1):
                if entries[i].role == "assistant":
                    seen += 1
                    start = i
                    if seen == limit:
                        break
            entries = entries[start:] if seen else []
        return "\n\n".join(f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}" for m in entries)

    def query(self) -> str:
        """The first user message."""
        for m in self.messages:
            if (
                isinstance(m, Text)
                and m.role == "user"
                and m.tag != "think"
                and not m.metadata.get("is_dummy")
            ):
                return m.content
        raise ValueError("the conversation has no user message")
