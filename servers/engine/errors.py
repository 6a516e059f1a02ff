"""The deliberate tool failure, shared by the store's look-ups and the tools."""

from __future__ import annotations


class ToolError(Exception):
    """A deliberate failure; its message is shown to the agent verbatim."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
