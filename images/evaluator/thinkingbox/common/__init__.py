"""What task files import: `from thinkingbox.common import Judge, TestContext`."""

from .chat_types import ParallelToolCall, Text, ToolCall, ToolCallResponse, ToolResponse
from .context import TestContext
from .judge import Judge, JudgeException

__all__ = [
    "Judge",
    "JudgeException",
    "ParallelToolCall",
    "TestContext",
    "Text",
    "ToolCall",
    "ToolCallResponse",
    "ToolResponse",
]
