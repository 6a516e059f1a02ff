"""The wire records of the Session API: request bodies (lax typing, extra keys
ignored, as the reference validates them) and the response envelope.

Every JSON answer is `{"success": bool, "content": {"type": "string"|"object",
"value": ...}}`, serialised compactly with key order kept and non-ASCII raw
(the reference's form; clients do not depend on it, matching costs nothing).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator
from starlette.responses import Response

from bench.run.prefix import MAX_PREFIX_CALLS, PrefixCall

INVALID_INPUT = "Invalid input"
NO_SESSION = "Session does not exist"
DEFAULT_TIMEOUT = 120.0


class _Body(BaseModel):
    # Unknown fields are accepted and ignored; numbers may come as numeric strings
    # (pydantic's lax mode), but a number is no string (StrictStr), as in the reference.
    model_config = ConfigDict(extra="ignore")


class SessionRef(_Body):
    session_id: StrictStr


class CreateBody(SessionRef):
    server_config: dict[str, dict[str, Any]]
    available_tools: list[StrictStr]
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    always_json_output: bool = False
    geteffects_proxy_info: bool = False
    # tbx's (the reference's clients never send them; docs/session-api.md): calls replayed
    # before the create answers, and a live session of the caller whose calls so far are
    # replayed first (its id: the one capability the API has for a session).
    prefix: list[PrefixCall] | None = Field(default=None, max_length=MAX_PREFIX_CALLS)
    fork_of: StrictStr | None = None


# CreateBody's own fields: a problem with one of these is answered with what it is (the
# reference's clients never send them, so its bare `Invalid input` need not be kept).
TBX_FIELDS = frozenset({"prefix", "fork_of"})


class CallBody(SessionRef):
    tool_name: StrictStr
    arguments: dict[str, Any]


class ServerToolArgs(_Body):
    """`arguments` of the reserved `__reserved__server_tool`."""

    server_name: StrictStr
    tool_name: StrictStr
    arguments: dict[str, Any]


class InfoBody(SessionRef):
    update: dict[str, Any] = Field(default_factory=dict)

    @field_validator("update")
    @classmethod
    def _answerable(cls, update: dict[str, Any]) -> dict[str, Any]:
        # Stored only what the envelope can answer (no NaN or infinity: strict JSON has
        # none), or every later /session_info of the session would fail.
        _dumps(update)
        return update


class GcBody(_Body):
    inactivity_minutes: float


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


class JSONEnvelope(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _dumps(content)


def ok(value: str | dict[str, Any]) -> JSONEnvelope:
    kind = "string" if isinstance(value, str) else "object"
    return JSONEnvelope({"success": True, "content": {"type": kind, "value": value}})


def fail(message: str, status: int = 400) -> JSONEnvelope:
    return JSONEnvelope({"success": False, "content": {"type": "string", "value": message}}, status)


def timed_out(timeout: float) -> JSONEnvelope:
    # `float` so the number always carries a decimal point ("108.0"), as the reference writes it.
    return fail(f"Tool call timed out after {float(timeout)!r} seconds", 504)


class ApiError(Exception):
    """A handled error: answered with the envelope (`status`, `message`)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message, self.status = message, status
