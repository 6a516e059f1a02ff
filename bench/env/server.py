"""The HTTP + WebSocket server: `openenv` 0.10's routes over `bench.env` episodes.

    GET  /health      {"status": "healthy"} while the process serves
    GET  /metadata    name, description, version (OpenEnv's EnvironmentMetadata) + what is served
    GET  /schema      JSON schemas of action, observation, state
    GET  /ready       200 when every component works, else 503 naming the failing ones
    WS   /ws          one session per connection (or `?session_id=` joins one made over /mcp),
                      one episode at a time (a new reset ends the last); message types
                      reset, step, state, close, mcp
    POST /mcp, WS /mcp  MCP JSON-RPC over the session's episode (bench.env.mcp_rpc)
    POST /reset       starts an episode held by the server; its id is `observation.metadata.episode_id`
    POST /step        {"action": ..., "episode_id": ...}
    GET  /state       ?episode_id=...
    Task API          /list_environments, /{env}/splits, /{env}/tasks, ... (bench.env.task_api)

OpenEnv's own HTTP server mode makes a fresh environment per /reset and /step
request; an episode here owns a sandbox, so the HTTP routes name the episode
(`episode_id`, a field OpenEnv's request models allow) and the server keeps it
until it ends, or idles out like a WebSocket episode whose client went quiet.

Malformed input never costs a client its socket or its episode: every frame and
body goes through `protocol.parse_json`, and a failing message is answered with
its error code while the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from bench.dataset import Task
from bench.env.episode import Episode
from bench.env.host import EnvHost
from bench.env.mcp_rpc import McpEndpoint, RpcCode, RpcError, error_reply
from bench.env.protocol import (
    EnvError,
    EpisodeState,
    ErrorCode,
    ResetRequest,
    parse_action,
    parse_json,
    schemas,
)
from bench.env.readiness import Readiness
from bench.env.sessions import EnvSession, Sessions, client_key, default_per_client
from bench.env.task_api import ENV_NAME, TaskApi
from bench.run.attempt import task_tool_policy
from bench.run.client_errors import client_error_text
from bench.run.prefix import PrefixCall, PrefixInvalid, PrefixRefused, check_prefix
from bench.web_guard import GuardPolicy, WebGuard

log = logging.getLogger(__name__)

KEEP_FINISHED = 1000  # ended HTTP episodes kept for GET /state
CAPACITY_POLL = 0.05  # seconds between capacity checks of a reset waiting for a slot
FATAL_POLL = 0.2


def _peer(conn: Request | WebSocket) -> str:
    """The client a request counts against (bench.env.sessions.client_key)."""
    return client_key(conn.client.host if conn.client is not None else None)


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in exc.errors())


class EnvServer:
    """`capacity_wait`: seconds a reset at capacity waits for a slot before CAPACITY_REACHED
    (0: answer at once). `on_fatal`: called once with the message when start-up meets a
    condition waiting cannot cure (`tbx env serve` exits with it)."""

    def __init__(
        self,
        host: EnvHost,
        capacity_wait: float = 0.0,
        on_fatal: Callable[[str], None] | None = None,
    ):
        self.host = host
        self.capacity_wait = capacity_wait
        self.on_fatal = on_fatal
        self.readiness = Readiness(host)
        self.http_episodes: OrderedDict[str, Episode] = OrderedDict()
        # episodes are bounded by max_episodes; sessions playing none by client (bench.env.sessions)
        per_client = host.opts.sessions_per_client or default_per_client(host.opts.max_episodes)
        self.sessions = Sessions(per_client=per_client, idle_timeout=host.opts.idle_timeout)
        self.mcp = McpEndpoint(self.sessions, self._http_episode)
        self.task_api = TaskApi(list(host.tasks.values()))

    # ---- shared by WS and HTTP ------------------------------------------------------
    def _id_taken(self, episode_id: str) -> bool:
        return episode_id in self.host.episodes or episode_id in self.http_episodes

    async def _wait_for_slot(self) -> None:
        deadline = time.monotonic() + self.capacity_wait
        while len(self.host.episodes) >= self.host.opts.max_episodes and time.monotonic() < deadline:
            await asyncio.sleep(CAPACITY_POLL)

    async def reset(self, data: Any, session: EnvSession | None = None) -> tuple[Episode, dict[str, Any]]:
        if not isinstance(data, dict):
            raise EnvError(ErrorCode.VALIDATION_ERROR, "reset data must be a JSON object")
        try:
            req = ResetRequest.model_validate(data)
        except ValidationError as exc:
            raise EnvError(ErrorCode.VALIDATION_ERROR, f"invalid reset: {_problems(exc)}", 422) from None
        if req.dataset is not None and req.dataset not in self.host.dataset_names:
            raise EnvError(
                ErrorCode.VALIDATION_ERROR,
                f"dataset {req.dataset[:80]!r} is not served here (this server serves "
                f"{self.host.bench.root.name!r})",
                422,
            )
        task = self.host.task(req.test_uid)
        if req.episode_id is not None and self._id_taken(req.episode_id):
            raise EnvError(
                ErrorCode.SESSION_ERROR, f"episode {req.episode_id!r} exists; omit episode_id", 409
            )
        # Before anything boots (or a session's episode ends): the calls to replay, checked.
        prefix = self._prefix(task, req)
        if session is not None and session.episode is not None and not session.episode.done:
            await session.episode.close("the client reset to start another episode")
        await self._wait_for_slot()
        # From here to the episode's registration in host.episodes nothing awaits, so the
        # id check and the capacity count cannot be raced by another reset.
        if req.episode_id is not None and self._id_taken(req.episode_id):
            raise EnvError(
                ErrorCode.SESSION_ERROR, f"episode {req.episode_id!r} exists; omit episode_id", 409
            )
        self.host.check_capacity()
        repeat = self.host.next_repeat(task, req.repeat)
        episode = Episode(self.host, task, repeat, req.episode_id, prefix=prefix, fork_of=req.fork_of)
        if session is not None:
            self.sessions.start_episode(session, episode)
        obs = await episode.start()
        return episode, obs.envelope()

    def _prefix(self, task: Task, req: ResetRequest) -> list[PrefixCall]:
        """The calls a reset replays before its observation: a fork's parent's calls so far,
        then the reset's own `prefix`; VALIDATION_ERROR (422) when a tool is one the task's
        allow-list forbids or there are too many, SESSION_ERROR when the parent is unknown
        or not live. The parent is named by its id: a capability the server drew and sent
        to the client that reset it alone (HTTP's /step takes it as one already)."""
        prefix = list(req.prefix or [])
        if req.fork_of is not None:
            parent = self.host.episodes.get(req.fork_of)
            if parent is None:
                raise EnvError(
                    ErrorCode.SESSION_ERROR,
                    f"fork_of: no live episode {req.fork_of[:80]!r} (a fork is made from a live episode)",
                    404,
                )
            if parent.task.id != task.id:
                raise EnvError(
                    ErrorCode.VALIDATION_ERROR,
                    f"fork_of: episode {req.fork_of[:80]!r} plays {parent.task.id}; a fork plays its "
                    "parent's task (test_uid)",
                    422,
                )
            prefix = parent.calls_so_far() + prefix
        if not prefix:
            return []
        try:
            check_prefix(prefix, task_tool_policy(self.host.bench, task))
        except (PrefixRefused, PrefixInvalid) as exc:
            raise EnvError(ErrorCode.VALIDATION_ERROR, f"invalid reset: {exc}", 422) from None
        return prefix

    # ---- WebSocket /ws --------------------------------------------------------------
    async def websocket(self, ws: WebSocket) -> None:
        await ws.accept()
        requested = ws.query_params.get("session_id")
        try:
            session = self.sessions.attach(requested) if requested else self.sessions.open_socket(_peer(ws))
        except EnvError as exc:
            with contextlib.suppress(Exception):
                await self._send_error(ws, exc)
                await ws.close()
            return
        try:
            while True:
                frame = await ws.receive()
                if frame["type"] == "websocket.disconnect":
                    return
                reply: dict[str, Any] | None
                try:
                    if frame.get("text") is None:
                        raise EnvError(
                            ErrorCode.INVALID_JSON, "Invalid JSON: binary frames are not accepted; send text"
                        )
                    reply = await self._ws_message(session, parse_json(frame["text"]))
                except EnvError as exc:
                    reply = {"type": "error", "data": exc.payload()}
                except Exception as exc:  # one bad message, not the whole session
                    log.exception("websocket message failed")
                    failed = EnvError(ErrorCode.EXECUTION_ERROR, client_error_text(exc, None))
                    reply = {"type": "error", "data": failed.payload()}
                if reply is None:
                    return
                await ws.send_json(reply)
        except (WebSocketDisconnect, OSError, RuntimeError):
            return  # the client went away mid-reply
        finally:
            session.attached = False
            if session.episode is not None and not session.episode.done:
                await session.episode.close("the client closed the connection")
            if not requested or session.closing:
                self.sessions.remove(session.id)
            with contextlib.suppress(Exception):
                await ws.close()

    async def _ws_message(self, session: EnvSession, message: Any) -> dict[str, Any] | None:
        """The reply to one message, or None for `close`."""
        if not isinstance(message, dict):
            raise EnvError(
                ErrorCode.VALIDATION_ERROR, 'a message is a JSON object {"type": ..., "data": ...}'
            )
        kind = message.get("type")
        if kind == "reset":
            data = message.get("data")
            _, result = await self.reset({} if data is None else data, session)
            return {"type": "observation", "data": result}
        if kind == "step":
            if session.episode is None:
                raise EnvError(ErrorCode.SESSION_ERROR, "no episode: send a reset first")
            action = parse_action(message.get("data"))
            obs = await session.episode.step(action)
            return {"type": "observation", "data": obs.envelope()}
        if kind == "state":
            state = session.episode.state() if session.episode is not None else EpisodeState()
            return {"type": "state", "data": state.model_dump(mode="json")}
        if kind == "close":
            return None
        if kind == "mcp":
            return {
                "type": "mcp",
                "data": await self.mcp.handle(message.get("data"), session, client=session.client),
            }
        raise EnvError(
            ErrorCode.UNKNOWN_TYPE,
            f"Unknown message type: {str(kind)[:80]!r} (reset, step, state, close or mcp)",
        )

    @staticmethod
    async def _send_error(ws: WebSocket, exc: EnvError) -> None:
        await ws.send_json({"type": "error", "data": exc.payload()})

    # ---- MCP ------------------------------------------------------------------------
    async def http_mcp(self, request: Request) -> JSONResponse:
        try:
            payload = await self._body(request)
        except EnvError as exc:
            return JSONResponse(
                error_reply(None, RpcError(RpcCode.PARSE_ERROR, exc.message)), status_code=400
            )
        return JSONResponse(await self.mcp.handle(payload, client=_peer(request)))

    async def ws_mcp(self, ws: WebSocket) -> None:
        """JSON-RPC per text frame; `?session_id=` names the session whose episode it reaches."""
        await ws.accept()
        requested = ws.query_params.get("session_id")
        own: EnvSession | None = None
        try:
            own = self.sessions.get(requested) if requested else None
            while True:
                frame = await ws.receive()
                if frame["type"] == "websocket.disconnect":
                    return
                try:
                    if frame.get("text") is None:
                        raise EnvError(ErrorCode.INVALID_JSON, "binary frames are not accepted; send text")
                    payload = parse_json(frame["text"])
                except EnvError as exc:
                    await ws.send_json(error_reply(None, RpcError(RpcCode.PARSE_ERROR, exc.message)))
                    continue
                await ws.send_json(await self.mcp.handle(payload, own, client=_peer(ws)))
        except EnvError as exc:
            with contextlib.suppress(Exception):
                await ws.send_json(error_reply(None, RpcError(RpcCode.INVALID_PARAMS, exc.message)))
        except WebSocketDisconnect:
            return
        except Exception:
            log.exception("MCP websocket failed")
        finally:
            with contextlib.suppress(Exception):
                await ws.close()

    # ---- HTTP -----------------------------------------------------------------------
    @staticmethod
    def _error(exc: EnvError) -> JSONResponse:
        response = JSONResponse(
            {"detail": exc.message, "code": exc.code.value, **exc.extra}, status_code=exc.status
        )
        retry_after = exc.extra.get("retry_after")
        if retry_after is not None:  # a capacity refusal: HTTP's own form of it too
            response.headers["retry-after"] = str(math.ceil(retry_after))
        return response

    @staticmethod
    async def _body(request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            return {}
        return parse_json(raw)

    def _http_episode(self, episode_id: Any) -> Episode:
        if not episode_id or not isinstance(episode_id, str):
            raise EnvError(
                ErrorCode.SESSION_ERROR,
                "episode_id is required: the id POST /reset returned (observation.metadata.episode_id)",
            )
        episode = self.http_episodes.get(episode_id)
        if episode is None:
            raise EnvError(
                ErrorCode.SESSION_ERROR, f"unknown episode {episode_id[:80]!r}: POST /reset first", 404
            )
        return episode

    def _keep(self, episode: Episode) -> None:
        """Hold an HTTP episode for /step and /state; drop the oldest ended ones beyond
        KEEP_FINISHED, wherever they sit behind live ones."""
        self.http_episodes[episode.id] = episode
        excess = len(self.http_episodes) - KEEP_FINISHED
        if excess > 0:
            for eid in [e for e, ep in self.http_episodes.items() if ep.done][:excess]:
                del self.http_episodes[eid]

    async def http_reset(self, request: Request) -> JSONResponse:
        try:
            data = await self._body(request)
            episode, result = await self.reset(data)
        except EnvError as exc:
            return self._error(exc)
        self._keep(episode)
        return JSONResponse(result)

    async def http_step(self, request: Request) -> JSONResponse:
        try:
            data = await self._body(request)
            if not isinstance(data, dict) or "action" not in data:
                raise EnvError(
                    ErrorCode.VALIDATION_ERROR, 'the body is {"action": {...}, "episode_id": "..."}', 422
                )
            episode = self._http_episode(data.get("episode_id"))
            action = parse_action(data["action"])
            obs = await episode.step(action)
        except EnvError as exc:
            return self._error(exc)
        return JSONResponse(obs.envelope())

    async def http_state(self, request: Request) -> JSONResponse:
        episode_id = request.query_params.get("episode_id")
        if not episode_id:
            return JSONResponse(EpisodeState().model_dump(mode="json"))
        try:
            episode = self._http_episode(episode_id)
        except EnvError as exc:
            return self._error(exc)
        return JSONResponse(episode.state().model_dump(mode="json"))

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "healthy"})

    async def ready(self, request: Request) -> JSONResponse:
        body = await self.readiness.report()
        return JSONResponse(body, status_code=200 if body["ready"] else 503)

    async def metadata(self, request: Request) -> JSONResponse:
        from importlib.metadata import PackageNotFoundError, version

        try:
            tbx_version = version("tbx")
        except PackageNotFoundError:
            tbx_version = "dev"
        host = self.host
        # names only: a client has no business with this machine's paths
        return JSONResponse(
            {
                "name": ENV_NAME,
                "description": "ThinkingBox-Bench tasks, one fresh tbx sandbox per episode; "
                "reward 1.0 when the end state matches the golden end state, else 0.0",
                "readme_content": None,
                "version": tbx_version,
                "author": None,
                "documentation_url": None,
                "dataset": host.bench.root.name,
                "tasks": len(host.tasks),
                "domains": host.domains,
                "max_episodes": host.opts.max_episodes,
                "active_episodes": len(host.episodes),
            }
        )

    async def schema(self, request: Request) -> JSONResponse:
        return JSONResponse(schemas())

    # ---- Task API ---------------------------------------------------------------------
    async def list_environments(self, request: Request) -> JSONResponse:
        return JSONResponse([ENV_NAME])

    async def splits(self, request: Request) -> JSONResponse:
        try:
            self.task_api.check_env(request.path_params["env_name"])
        except EnvError as exc:
            return self._error(exc)
        return JSONResponse(self.task_api.splits())

    def _task_route(self, method: Callable[[Any], dict[str, Any]]) -> Callable[[Request], Any]:
        async def route(request: Request) -> JSONResponse:
            try:
                self.task_api.check_env(request.path_params["env_name"])
                return JSONResponse(method(await self._body(request)))
            except EnvError as exc:
                return self._error(exc)

        return route

    # ---- the app ----------------------------------------------------------------------
    async def _watch_fatal(self) -> None:
        while self.host.fatal is None:
            await asyncio.sleep(FATAL_POLL)
        if self.on_fatal is not None:
            self.on_fatal(self.host.fatal)

    def app(self, guard: GuardPolicy | None = None) -> Starlette:
        """The ASGI app, behind bench.web_guard (default: loopback Host names, same origin, JSON POSTs)."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            await self.host.start()
            watch = asyncio.create_task(self._watch_fatal())
            try:
                yield
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
                await self.host.close()

        api = self.task_api
        return Starlette(
            routes=[
                Route("/health", self.health, methods=["GET"]),
                Route("/metadata", self.metadata, methods=["GET"]),
                Route("/schema", self.schema, methods=["GET"]),
                Route("/ready", self.ready, methods=["GET"]),
                Route("/reset", self.http_reset, methods=["POST"]),
                Route("/step", self.http_step, methods=["POST"]),
                Route("/state", self.http_state, methods=["GET"]),
                Route("/mcp", self.http_mcp, methods=["POST"]),
                WebSocketRoute("/mcp", self.ws_mcp),
                WebSocketRoute("/ws", self.websocket),
                Route("/list_environments", self.list_environments, methods=["GET"]),
                Route("/{env_name}/splits", self.splits, methods=["GET"]),
                Route("/{env_name}/tasks", self._task_route(api.list_tasks), methods=["POST"]),
                Route("/{env_name}/num_tasks", self._task_route(api.num_tasks), methods=["POST"]),
                Route("/{env_name}/task", self._task_route(api.task), methods=["POST"]),
                Route("/{env_name}/task_range", self._task_route(api.task_range), methods=["POST"]),
            ],
            lifespan=lifespan,
            middleware=[Middleware(WebGuard, policy=guard or GuardPolicy())],
        )
