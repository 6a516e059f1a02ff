"""OpenEnv's MCP JSON-RPC: `POST /mcp`, `WS /mcp`, and the `mcp` message of `WS /ws`.

    openenv/session/create              -> {"session_id"}     (a session a `/ws?session_id=` joins)
    openenv/session/close {session_id}  -> {"session_id", "closed": true}  (ends its episode)
    tools/list {session_id | episode_id} -> {"tools": [{name, description, inputSchema}]}
    tools/call {name, arguments, session_id | episode_id}
                                        -> {"content": [{"type": "text", "text"}], "isError",
                                            "data": the result text, "tool_error", "done", ...}

Tools are those of the session's current episode, exactly as its `list_tools` step
shows them (the task's allow-list, description overrides applied), and a call is
that episode's `call_tool` step: same proxy, limits and recording, the same turn
limits. A tool's own failure is a result with `isError` (the agent reads it); the
JSON-RPC errors are the server's: unknown session, no episode yet, a reserved or
missing tool name, an episode that has ended.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from bench.env.protocol import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    EnvError,
    ErrorCode,
    ListToolsAction,
    Observation,
)

if TYPE_CHECKING:
    from bench.env.episode import Episode
    from bench.env.sessions import EnvSession, Sessions


class RpcCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


class RpcError(Exception):
    def __init__(self, code: RpcCode, message: str, data: Any = None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def reply(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_reply(request_id: Any, exc: RpcError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": int(exc.code), "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def from_env_error(exc: EnvError) -> RpcError:
    if exc.code == ErrorCode.SESSION_ERROR and exc.status == 404:
        return RpcError(RpcCode.INVALID_PARAMS, exc.message)
    if exc.code in (ErrorCode.VALIDATION_ERROR, ErrorCode.UNKNOWN_TYPE):
        return RpcError(RpcCode.INVALID_PARAMS, exc.message)
    return RpcError(RpcCode.SERVER_ERROR, exc.message, {"code": exc.code.value, **exc.extra})


def mcp_tool(openai_tool: dict[str, Any]) -> dict[str, Any]:
    fn = openai_tool.get("function", {})
    return {
        "name": fn.get("name", ""),
        "description": fn.get("description") or "",
        "inputSchema": fn.get("parameters") or {"type": "object", "properties": {}},
    }


def call_result(obs: Observation) -> dict[str, Any]:
    """A tools/call result from the episode's observation: MCP's content + isError,
    openenv's `data` (what `MCPToolClient.call_tool` returns), and the episode's fields."""
    if obs.kind == "terminal":  # the call did not run: a limit or a system error ended the episode
        text = obs.system_error or f"the episode ended ({obs.metadata.get('finish_reason', 'done')})"
        return {
            "content": [{"type": "text", "text": text}],
            "isError": True,
            "data": text,
            "done": True,
            "reward": obs.reward,
            "reward_type": obs.reward_type,
            "test_summary": obs.test_summary,
        }
    text = obs.tool_result or ""
    return {
        "content": [{"type": "text", "text": text}],
        "isError": obs.tool_error is not None,
        "data": text,
        "tool_error": obs.tool_error,
        "call_id": obs.metadata.get("call_id"),
        "done": False,
    }


class McpEndpoint:
    """One JSON-RPC request at a time, against the server's sessions and HTTP episodes."""

    def __init__(self, sessions: Sessions, http_episode: Callable[[Any], Episode]):
        self.sessions = sessions
        self.http_episode = http_episode

    async def handle(self, payload: Any, own: EnvSession | None = None, *, client: str) -> dict[str, Any]:
        """The reply to one request: `own`, the session of the WebSocket it came over (if
        any); `client`, who sent it (bench.env.sessions.client_key: its sessions' cap)."""
        request_id = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(request_id, str | int | None) or isinstance(request_id, bool):
            request_id = None
        try:
            method, params = self._request(payload)
            return reply(request_id, await self._dispatch(method, params, own, client))
        except RpcError as exc:
            return error_reply(request_id, exc)
        except EnvError as exc:
            return error_reply(request_id, from_env_error(exc))

    @staticmethod
    def _request(payload: Any) -> tuple[str, dict[str, Any]]:
        if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
            raise RpcError(
                RpcCode.INVALID_REQUEST, 'Invalid Request: a JSON-RPC 2.0 object ("jsonrpc": "2.0")'
            )
        method = payload.get("method")
        if not isinstance(method, str) or not method:
            raise RpcError(RpcCode.INVALID_REQUEST, "Invalid Request: `method` must be a non-empty string")
        params = payload.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(RpcCode.INVALID_PARAMS, "Params must be an object")
        return method, params

    async def _dispatch(
        self, method: str, params: dict[str, Any], own: EnvSession | None, client: str
    ) -> Any:
        if method == "openenv/session/create":
            session = own or self.sessions.create(client)
            return {"session_id": session.id}
        if method == "openenv/session/close":
            return await self._close(params, own)
        if method == "tools/list":
            episode = self._episode(params, own)
            obs = await episode.step(ListToolsAction())
            return {"tools": [mcp_tool(t) for t in obs.tools or []]}
        if method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str) or not name:
                raise RpcError(RpcCode.INVALID_PARAMS, "Missing 'name' in params")
            if name in RESERVED_TOOL_NAMES:
                raise RpcError(RpcCode.INVALID_PARAMS, f"{name!r} is a reserved name (OpenEnv's own message)")
            arguments = params.get("arguments", {})
            if arguments is not None and not isinstance(arguments, dict):
                raise RpcError(RpcCode.INVALID_PARAMS, "'arguments' must be an object")
            episode = self._episode(params, own)
            action = CallToolAction(tool_name=name, arguments=arguments or {}, call_id=_call_id(params))
            return call_result(await episode.step(action))
        raise RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method[:80]}")

    def _episode(self, params: dict[str, Any], own: EnvSession | None) -> Episode:
        if own is not None:
            session = own
        elif params.get("session_id") is not None:
            session = self.sessions.get(params["session_id"])
        elif params.get("episode_id") is not None:
            return self.http_episode(params["episode_id"])
        else:
            raise RpcError(
                RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' (or 'episode_id') is required"
            )
        if session.episode is None:
            raise RpcError(
                RpcCode.INVALID_REQUEST,
                f"session {session.id} has no episode yet: send a reset (WS /ws?session_id={session.id}) first",
            )
        return session.episode

    async def _close(self, params: dict[str, Any], own: EnvSession | None) -> dict[str, Any]:
        target = params.get("session_id")
        if not isinstance(target, str) or not target:
            raise RpcError(RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required")
        if own is not None and own.id == target:
            raise RpcError(RpcCode.INVALID_REQUEST, "Cannot close the WebSocket's own session via MCP")
        session = self.sessions.get(target)
        if session.attached:
            session.closing = True  # the socket's end closes it
            return {"session_id": target, "closed": False, "closing": True}
        self.sessions.remove(target)
        if session.episode is not None and not session.episode.done:
            await session.episode.close("the client closed the session")
        return {"session_id": target, "closed": True}


def _call_id(params: dict[str, Any]) -> str | None:
    value = params.get("call_id")
    return value if isinstance(value, str) and len(value) <= 255 else None
