"""The message types a test sees (`x.messages`, `x.tool_calls`): plain objects with a
type tag `T` and a `metadata` dict, rebuilt from the JSON tbx sends."""

from __future__ import annotations

from typing import Any

__all__ = [
    "Message",
    "ParallelToolCall",
    "Text",
    "ToolCall",
    "ToolCallResponse",
    "ToolResponse",
    "message_from_json",
]


class Message:
    T = "Message"

    def __init__(self, metadata: dict[str, Any] | None = None) -> None:
        self.metadata: dict[str, Any] = dict(metadata or {})

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{self.T}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)


class Text(Message):
    T = "Text"

    def __init__(self, role: str = "user", content: str = "", metadata: dict[str, Any] | None = None) -> None:
        super().__init__(metadata)
        self.role = role
        self.content = content

    @property
    def tag(self) -> str:
        return str(self.metadata.get("tag") or "text")

    @property
    def is_visible(self) -> bool:
        return self.tag != "think"


class ToolCall(Message):
    T = "ToolCall"

    def __init__(
        self,
        name: str = "",
        arguments: dict[str, Any] | None = None,
        id: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(metadata)
        self.name = name
        self.arguments: dict[str, Any] = arguments if arguments is not None else {}
        self.id = id


class ParallelToolCall(Message):
    T = "ParallelToolCall"

    def __init__(
        self, tool_calls: list[ToolCall] | None = None, metadata: dict[str, Any] | None = None
    ) -> None:
        super().__init__(metadata)
        self.tool_calls: list[ToolCall] = list(tool_calls or [])


class ToolResponse(Message):
    T = "ToolResponse"

    def __init__(
        self, name: str = "", content: str = "", id: str = "", metadata: dict[str, Any] | None = None
    ) -> None:
        super().__init__(metadata)
        self.name = name
        self.content = content
        self.id = id


class ToolCallResponse:
    """One entry of `x.tool_calls`: a call and its reply."""

    def __init__(self, tool_call: ToolCall, tool_response: ToolResponse) -> None:
        self.tool_call = tool_call
        self.tool_response = tool_response

    def __repr__(self) -> str:
        return f"ToolCallResponse(tool_call={self.tool_call!r}, tool_response={self.tool_response!r})"


def message_from_json(obj: dict[str, Any]) -> Message:
    """A message from its JSON form, its class chosen by `T`."""
    kind = obj.get("T")
    meta = obj.get("metadata") or {}
    if kind == "Text":
        return Text(obj.get("role", "user"), obj.get("content", ""), meta)
    if kind == "ToolCall":
        return ToolCall(obj.get("name", ""), obj.get("arguments") or {}, obj.get("id", ""), meta)
    if kind == "ParallelToolCall":
        calls = [message_from_json(c) for c in obj.get("tool_calls") or []]
        return ParallelToolCall([c for c in calls if isinstance(c, ToolCall)], meta)
    if kind == "ToolResponse":
        return ToolResponse(obj.get("name", ""), obj.get("content", ""), obj.get("id", ""), meta)
    raise ValueError(f"unknown message type {kind!r}")
