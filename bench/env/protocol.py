"""The OpenEnv wire format of `tbx env serve`.

Envelope (as openenv-core's `EnvClient` and `HTTPEnvServer` speak it):

    WS /ws   client: {"type": "reset", "data": {...}} | {"type": "step", "data": ACTION}
                     | {"type": "state"} | {"type": "close"}
             server: {"type": "observation", "data": {"observation": OBS, "reward": R, "done": D}}
                     | {"type": "state", "data": STATE}
                     | {"type": "error", "data": {"message": ..., "code": ERROR_CODE}}
    HTTP     POST /reset {...reset fields}      -> {"observation": OBS, "reward": R, "done": D}
             POST /step {"action": ACTION, "episode_id": ID} -> the same
             GET /state?episode_id=ID           -> STATE

Actions and observations follow the published ThinkingBox environment:
`list_tools`, `call_tool` (one call, or a `parallel_tool_calls` batch) and
`submit_message` (the agent's text to the customer). `reward` is 1.0 for a
pass and 0.0 for a fail, only on the terminal observation; a system error
ends the episode with `reward_type: system_error` and no reward.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator


class ErrorCode(StrEnum):
    """openenv-core's `WSErrorCode` values (the client shows `code` in its error)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    SESSION_ERROR = "SESSION_ERROR"


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
    """`test_uid`: the task id (or uid). `repeat` (or OpenEnv's `seed`) numbers the
    attempt and seeds the simulated user; default: the task's next unused repeat."""

    model_config = ConfigDict(extra="forbid")

    test_uid: str = Field(min_length=1)
    repeat: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)

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
    kind: ObservationKind
    episode_id: str | None = None
    task_uid: str | None = None
    task: str | None = None  # the customer's opening request
    system_instructions: str | None = None
    bot_instructions: str | None = None
    tools: list[dict[str, Any]] | None = None  # OpenAI function form, allow-listed, overrides applied
    messages: list[dict[str, Any]] | None = None
    call_id: str | None = None
    tool_name: str | None = None
    tool_result: str | None = None
    tool_error: ToolErrorKind | None = None
    tool_results: list[ToolResult] | None = None  # tool_batch, and calls made by submit_message
    user_message: str | None = None
    response: str | None = None  # the agent's message this observation answers
    finish_reason: str | None = None
    reward_type: RewardType | None = None
    system_error: str | None = None
    error: str | None = None  # kind "error": what was wrong with the step
    steps_taken: int = 0
    done: bool = False
    reward: float | None = None
    # terminal: attempt id, failure signature, counts of labelled differences (never golden values)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def envelope(self) -> dict[str, Any]:
        """The OpenEnv step result: {"observation", "reward", "done"}."""
        return {
            "observation": self.model_dump(mode="json", exclude={"done", "reward"}),
            "reward": self.reward,
            "done": self.done,
        }


class EpisodeState(BaseModel):
    """GET /state and WS "state": OpenEnv's `State` (episode_id, step_count) plus the episode's phase."""

    episode_id: str | None = None
    step_count: int = 0
    task_uid: str | None = None
    phase: Literal["idle", "starting", "running", "done", "closed"] = "idle"
    done: bool = False
    reward: float | None = None
    reward_type: RewardType | None = None
    attempt_id: str | None = None
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
