"""The OpenEnv wire format of `tbx env serve`.

Envelope (as `openenv` 0.10's `EnvClient`/`MCPToolClient` and `HTTPEnvServer` speak it;
openenv-core 0.3's client speaks the same subset without `mcp`):

    WS /ws[?session_id=S]
             client: {"type": "reset", "data": {...}} | {"type": "step", "data": ACTION}
                     | {"type": "state"} | {"type": "close"} | {"type": "mcp", "data": JSON-RPC}
             server: {"type": "observation", "data": {"observation": OBS, "reward": R, "done": D,
                                                      "metadata": M}}
                     | {"type": "state", "data": STATE} | {"type": "mcp", "data": JSON-RPC reply}
                     | {"type": "error", "data": {"message": ..., "code": ERROR_CODE}}
    HTTP     POST /reset {...reset fields}      -> {"observation": OBS, "reward": R, "done": D, ...}
             POST /step {"action": ACTION, "episode_id": ID} -> the same
             GET /state?episode_id=ID           -> STATE
             POST /mcp JSON-RPC (bench.env.mcp_rpc)

Actions and observations follow the published ThinkingBox environment:
`list_tools`, `call_tool` (one call, or a `parallel_tool_calls` batch) and
`submit_message` (the agent's text to the customer). `reward` is 1.0 for a
pass and 0.0 for a fail (for a task graded by its test function: the test's
reward, a number in [0, 1]), only on the terminal observation; a system error
ends the episode with `reward_type: system_error` and no reward.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    TypeAdapter,
    field_validator,
    model_validator,
)

from bench.run.prefix import MAX_PREFIX_CALLS, PrefixCall


class ErrorCode(StrEnum):
    """openenv's `WSErrorCode` values (the client shows `code` in its error)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"  # the server cannot make episodes at all (start-up failed)
    SESSION_ERROR = "SESSION_ERROR"


# OpenEnv keeps these names for its own message types: no served tool may carry one.
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})
MAX_REPEAT = 1_000_000  # repeats number the attempts of a task; far beyond any k, short in a file name


class EnvError(Exception):
    """A request the server refuses: sent as a WS error message or an HTTP 4xx/503."""

    def __init__(self, code: ErrorCode, message: str, status: int = 400, **extra: Any):
        super().__init__(message)
        self.code, self.message, self.status, self.extra = code, message, status, extra

    def payload(self) -> dict[str, Any]:
        return {"message": self.message, "code": self.code.value, **self.extra}


# ---- actions ------------------------------------------------------------------


class ToolCallSpec(BaseModel):
    """One tool call of a batch. `arguments` is an object or its JSON text (as a model writes it)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    arguments: Any = None
    call_id: str | None = None
    # the published environment's: the agent's tool call could not be parsed (it is answered
    # as invalid arguments, and nothing is sent to the tool server)
    parse_error: str | None = None


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(default_factory=dict)


class ListToolsAction(_Action):
    type: Literal["list_tools"] = "list_tools"


class CallToolAction(_Action):
    """`tool_name` + `arguments` (+ `call_id`), or `parallel_tool_calls`: a batch run in order."""

    type: Literal["call_tool"] = "call_tool"
    tool_name: str | None = None
    arguments: Any = None
    call_id: str | None = None
    parallel_tool_calls: list[ToolCallSpec] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> CallToolAction:
        if self.parallel_tool_calls is not None:
            if self.tool_name is not None:
                raise ValueError("give tool_name or parallel_tool_calls, not both")
            if not self.parallel_tool_calls:
                raise ValueError("parallel_tool_calls is empty")
        elif not self.tool_name:
            raise ValueError("call_tool needs tool_name (or parallel_tool_calls)")
        return self

    def calls(self) -> list[ToolCallSpec]:
        if self.parallel_tool_calls is not None:
            return list(self.parallel_tool_calls)
        assert self.tool_name is not None
        return [ToolCallSpec(name=self.tool_name, arguments=self.arguments, call_id=self.call_id)]


class SubmitMessageAction(_Action):
    """The agent's message to the customer. `tool_calls_before_content` run (through
    the proxy, in order) before the message is delivered; `terminal_tool_calls`
    are end-turn tools (e.g. a hand-off): the conversation ends with this message."""

    type: Literal["submit_message"] = "submit_message"
    content: str = ""
    terminal_tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    tool_calls_before_content: list[ToolCallSpec] = Field(default_factory=list)


Action = Annotated[ListToolsAction | CallToolAction | SubmitMessageAction, Field(discriminator="type")]
ACTION_ADAPTER: TypeAdapter[ListToolsAction | CallToolAction | SubmitMessageAction] = TypeAdapter(Action)
ACTION_TYPES = ("list_tools", "call_tool", "submit_message")


def parse_action(data: Any) -> ListToolsAction | CallToolAction | SubmitMessageAction:
    """An action, or EnvError(VALIDATION_ERROR / UNKNOWN_TYPE) saying what is wrong with it."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise EnvError(ErrorCode.VALIDATION_ERROR, f"an action is a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if kind not in ACTION_TYPES:
        raise EnvError(
            ErrorCode.UNKNOWN_TYPE,
            f"unknown action type {kind!r}: use one of {', '.join(ACTION_TYPES)}",
            status=422,
        )
    try:
        return ACTION_ADAPTER.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or '(action)'}: {e['msg']}" for e in exc.errors()
        )
        raise EnvError(ErrorCode.VALIDATION_ERROR, f"invalid {kind} action: {problems}", status=422) from None


# ---- reset --------------------------------------------------------------------


class ResetRequest(BaseModel):
    """What the published ThinkingBox environment's `reset` takes, plus tbx's `repeat`.

    `test_uid`: the task id (or uid). `dataset`: the served benchmark's name, checked
    when given. `agent`: a label recorded with the episode. `config`: the published
    environment's native config; accepted and ignored (the server's models config
    governs). `seed`: OpenEnv's, accepted and ignored. `repeat` numbers the attempt
    (and seeds the simulated user): default the task's next unused repeat; a repeat
    already recorded or running is refused, never reused.

    tbx's additions for episodes that start part-way (bench.run.prefix; docs/openenv.md):
    `prefix`, calls `{"tool", "arguments"}` replayed through the proxy before the reset
    observation (every tool in the task's allow-list, at most MAX_PREFIX_CALLS); `fork_of`,
    the id of a live episode of the same task whose calls so far are replayed first (the
    id is the capability: the server sent it only to the client that reset that episode)."""

    model_config = ConfigDict(extra="forbid")

    test_uid: str = Field(min_length=1, max_length=512)
    dataset: str | None = Field(default=None, max_length=512)
    agent: str | None = Field(default=None, max_length=128)
    config: Any = None
    repeat: StrictInt | None = Field(default=None, ge=0, lt=MAX_REPEAT)
    seed: int | None = None
    episode_id: str | None = Field(default=None, min_length=1, max_length=255)
    prefix: list[PrefixCall] | None = Field(default=None, max_length=MAX_PREFIX_CALLS)
    fork_of: str | None = Field(default=None, min_length=1, max_length=255)

    @field_validator("test_uid")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()


# ---- observations -------------------------------------------------------------

ObservationKind = Literal["reset", "tools", "tool", "tool_batch", "user", "terminal", "error"]
ToolErrorKind = Literal["tool_not_found", "invalid_args", "execution_error"]
RewardType = Literal["pass", "fail", "system_error"]


class ToolResult(BaseModel):
    call_id: str | None = None
    name: str
    tool_result: str
    tool_error: ToolErrorKind | None = None


class Observation(BaseModel):
    """The published ThinkingBox environment's observation fields, and OpenEnv's `metadata`.

    What tbx adds (episode_id, call_id, tool_name, the agent's `response`, finish_reason,
    the error of a refused step, attempt id, repeat) travels in `metadata`, so a client
    whose observation model forbids unknown fields parses these unchanged."""

    kind: ObservationKind
    task_uid: str | None = None
    task: str | None = None  # the customer's opening request
    system_instructions: str | None = None
    bot_instructions: str | None = None
    tools: list[dict[str, Any]] | None = None  # OpenAI function form, allow-listed, overrides applied
    messages: list[dict[str, Any]] | None = None
    tool_result: str | None = None
    tool_error: ToolErrorKind | None = None
    tool_results: list[ToolResult] | None = None  # tool_batch, and calls made by submit_message
    user_message: str | None = None
    reward_type: RewardType | None = None
    system_error: str | None = None
    # terminal: pass/fail, failure signature, counts of labelled differences (never golden values)
    test_summary: dict[str, Any] | None = None
    steps_taken: int = 0
    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def build(cls, kind: str, **fields: Any) -> Observation:
        """An observation from any fields: the schema's own go top level, the rest into metadata."""
        own = {k: v for k, v in fields.items() if k in cls.model_fields and k != "metadata"}
        extra = {k: v for k, v in fields.items() if k not in cls.model_fields and v is not None}
        return cls(kind=kind, **own, metadata={**extra, **fields.get("metadata", {})})  # type: ignore[arg-type]

    def envelope(self) -> dict[str, Any]:
        """The OpenEnv step result: {"observation", "reward", "done", "metadata"}. `tools` only
        when there are tools: openenv's MCPToolClient reads any `tools` key as a listing."""
        skip = {"done", "reward", *(["tools"] if self.tools is None else [])}
        return {
            "observation": self.model_dump(mode="json", exclude=skip),
            "reward": self.reward,
            "done": self.done,
            "metadata": self.metadata,
        }


EpisodeStatus = Literal["idle", "active", "finalizing", "done", "closed", "error"]


class EpisodeState(BaseModel):
    """GET /state and WS "state": OpenEnv's `State` (episode_id, step_count) plus the
    published environment's `status`: idle (no episode), active (being set up or played),
    finalizing (the conversation ended; terminal state and grading), done (graded), closed
    (ended by the client or the server before its end), error (ended by a system error)."""

    episode_id: str | None = None
    step_count: int = 0
    status: EpisodeStatus = "idle"
    task_uid: str | None = None
    done: bool = False
    reward: float | None = None
    reward_type: RewardType | None = None
    attempt_id: str | None = None
    repeat: int | None = None
    # the episode's sandbox containers (role -> container id), for `docker logs` on this machine
    containers: dict[str, str] = Field(default_factory=dict)


def schemas() -> dict[str, Any]:
    """GET /schema: the JSON schemas of actions, observations and state (OpenEnv's SchemaResponse)."""
    return {
        "action": ACTION_ADAPTER.json_schema(),
        "observation": Observation.model_json_schema(),
        "state": EpisodeState.model_json_schema(),
        "reset": ResetRequest.model_json_schema(),
    }


# ---- JSON in --------------------------------------------------------------------

MAX_DEPTH = 64  # nesting any real action or reset needs is < 10; deeper is refused before parsing


def _too_deep(text: str) -> bool:
    """Brackets nested deeper than MAX_DEPTH outside strings (json.loads would recurse)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def parse_json(raw: bytes | str) -> Any:
    """A request body or WebSocket text frame, or EnvError(INVALID_JSON) saying why not:
    invalid UTF-8, not JSON, nested deeper than MAX_DEPTH, or an integer longer than
    Python converts (4300 digits)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EnvError(ErrorCode.INVALID_JSON, f"Invalid JSON: not UTF-8 (byte {exc.start})") from None
    if raw.count("[") + raw.count("{") > MAX_DEPTH and _too_deep(raw):
        raise EnvError(ErrorCode.INVALID_JSON, f"Invalid JSON: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise EnvError(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc.msg} at position {exc.pos}") from None
    except (ValueError, RecursionError) as exc:  # an integer past the int-conversion limit
        raise EnvError(ErrorCode.INVALID_JSON, f"Invalid JSON: {str(exc)[:200]}") from None
