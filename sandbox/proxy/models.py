"""The tool proxy's records: what registers an attempt (`RegisterRequest`,
with its `ToolPolicy`), what registration returns, what a call leaves behind.
The same models serve the in-process API and the standalone proxy's admin API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sandbox.errors import SandboxError
from sandbox.faults import CONTAINER_FAULT, Fault

Outcome = Literal["ok", "tool_error", "refused", "timeout", "upstream_error", "protocol_error"]


class ProxyError(SandboxError):
    pass


class SandboxGoneError(ProxyError):
    """The attempt's sandbox vanished or was replaced while registered: a system error
    (the infrastructure's fault), which a new try in a fresh sandbox may cure. Its fault
    is a container's; `fault=` says otherwise for one instance (the loss's own: a set
    whose daemon could not be asked was lost by the node, `Loss.fault`)."""

    fault = CONTAINER_FAULT

    def __init__(self, *args: object, fault: Fault | None = None):
        super().__init__(*args)
        if fault is not None:
            self.fault = fault  # kept when pickled (the instance's __dict__)


class UpstreamUnreachable(ProxyError):
    """An attempt's tool server could not be reached or did not answer at registration
    (the admin API answers it 502, a bad request 400: by type, not by its words)."""


class ResourceLimitHit(ProxyError):
    """The attempt's own calls drove its sandbox over a limit (sandbox.proxy.loss), and
    what drove the attempt failed on it: the agent's outcome, graded a failure
    (`resource_limit`), never a system error and never retried (a new try of the same
    calls hits the same limit). `cause`: the loss in words."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause


class ToolPolicy(BaseModel):
    """What an attempt may see and call through the proxy."""

    model_config = ConfigDict(frozen=True)

    allowed_tools: list[str] | None = None  # None: every tool its servers list (in their order)
    overrides: dict[str, str] = Field(default_factory=dict)  # tool -> description shown instead
    arg_overrides: dict[str, dict[str, str]] = Field(default_factory=dict)  # tool -> {arg: description}


class Upstream(BaseModel):
    url: str  # the server's MCP endpoint
    headers: dict[str, str] = Field(default_factory=dict)  # sent on every request (the upstream secret)
    # The host network device the server is reached through (a sandbox's bridge):
    # connections are bound to it, so once the bridge is gone they fail instead of
    # following the host's default route out of the machine.
    interface: str | None = None
    # Its tools/list (MCP JSON) when taken already (a sandbox's prepare): the registration
    # then neither lists nor connects; the MCP client of the SDK path connects on its first
    # call. None: connect and list at registration.
    tools: list[dict[str, Any]] | None = None


class RegisterRequest(BaseModel):
    """One attempt's registration: its servers, its tool policy and, for a real
    sandbox, the containers and network whose loss ends the attempt."""

    attempt_id: str = Field(min_length=1)
    upstreams: dict[str, Upstream] = Field(min_length=1)  # domain -> server
    policy: ToolPolicy = Field(default_factory=ToolPolicy)
    call_timeout: float | None = Field(default=None, gt=0)
    # role -> container id: checked running at registration and watched after;
    # one gone (or the network) and every later call is refused.
    containers: dict[str, str] = Field(default_factory=dict)
    network: str | None = None

    @field_validator("upstreams", mode="before")
    @classmethod
    def _plain_urls(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: {"url": v} if isinstance(v, str) else v for k, v in value.items()}
        return value


class Registration(BaseModel):
    attempt_id: str
    token: str
    url: str  # send `Authorization: Bearer <token>`
    path_url: str  # the same endpoint with the token in the path (for clients that cannot set headers)
    tools: list[str]  # what tools/list shows, in order
    # The same tools as tools/list answers them (MCP JSON, overrides applied): an agent
    # that has this need not list them again.
    listing: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class ProxyCall(BaseModel):
    """One tool call that reached the proxy, as it goes into the attempt's trajectory."""

    attempt_id: str
    tool: str
    arguments: dict[str, Any]
    result: str  # the text content of the result (what the agent reads)
    is_error: bool  # MCP's isError flag of the result handed to the agent
    # ok | tool_error (upstream isError) | refused (unknown, not allow-listed or reserved) | timeout |
    # upstream_error (the server did not answer) | protocol_error (it answered with a JSON-RPC error)
    outcome: Outcome
    domain: str | None = None  # the backend that served it (None when refused)
    started_at: datetime
    latency_ms: float
