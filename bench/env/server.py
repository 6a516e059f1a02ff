"""The HTTP + WebSocket server: OpenEnv's routes over `bench.env` episodes.

    GET  /health     {"status": "healthy"} while the process serves
    GET  /metadata   name, description, version (OpenEnv's EnvironmentMetadata) + what is served
    GET  /schema     JSON schemas of action, observation, state (and the reset fields)
    GET  /ready      200 when every component works, else 503 naming the failing ones
    WS   /ws         one session per connection, one episode at a time (a new reset ends the last)
    POST /reset      starts an episode held by the server; its id is `observation.episode_id`
    POST /step       {"action": ..., "episode_id": ...}
    GET  /state      ?episode_id=...

OpenEnv's own HTTP server mode makes a fresh environment per /reset and /step
request; an episode here owns a sandbox, so the HTTP routes name the episode
(`episode_id`, a field OpenEnv's request models allow) and the server keeps it
until it ends, or idles out like a WebSocket episode whose client went quiet.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from bench.env.episode import Episode
from bench.env.host import EnvHost
from bench.env.protocol import EnvError, EpisodeState, ErrorCode, ResetRequest, parse_action, schemas
from bench.env.readiness import Readiness
from bench.run.client_errors import client_error_text
from bench.web_guard import GuardPolicy, WebGuard

log = logging.getLogger(__name__)

KEEP_FINISHED = 1000  # ended HTTP episodes kept for GET /state


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in exc.errors())


class EnvServer:
    def __init__(self, host: EnvHost):
        self.host = host
        self.readiness = Readiness(host)
        self.http_episodes: OrderedDict[str, Episode] = OrderedDict()

    # ---- shared by WS and HTTP ------------------------------------------------------
    async def reset(self, data: Any, previous: Episode | None = None) -> tuple[Episode, dict[str, Any]]:
        if not isinstance(data, dict):
            raise EnvError(ErrorCode.VALIDATION_ERROR, "reset data must be a JSON object")
        try:
            req = ResetRequest.model_validate(data)
        except ValidationError as exc:
            raise EnvError(ErrorCode.VALIDATION_ERROR, f"invalid reset: {_problems(exc)}", 422) from None
        task = self.host.task(req.test_uid)
        if previous is not None and not previous.done:
            await previous.close("the client reset to start another episode")
        self.host.check_capacity()
        repeat = self.host.next_repeat(task, req.repeat if req.repeat is not None else req.seed)
        episode = Episode(self.host, task, repeat, req.episode_id)
        obs = await episode.start()
        return episode, obs.envelope()

    # ---- WebSocket ------------------------------------------------------------------
    async def websocket(self, ws: WebSocket) -> None:
        await ws.accept()
        episode: Episode | None = None
        try:
            while True:
                try:
                    raw = await ws.receive_text()
                except WebSocketDisconnect:
                    return
                try:
                    message = json.loads(raw)
                except json.JSONDecodeError as exc:
                    await self._send_error(ws, EnvError(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}"))
                    continue
                kind = message.get("type") if isinstance(message, dict) else None
                try:
                    if kind == "reset":
                        episode, result = await self.reset(message.get("data") or {}, episode)
                        await ws.send_json({"type": "observation", "data": result})
                    elif kind == "step":
                        if episode is None:
                            raise EnvError(ErrorCode.SESSION_ERROR, "no episode: send a reset first")
                        action = parse_action(message.get("data"))
                        obs = await episode.step(action)
                        await ws.send_json({"type": "observation", "data": obs.envelope()})
                    elif kind == "state":
                        state = episode.state() if episode is not None else EpisodeState()
                        await ws.send_json({"type": "state", "data": state.model_dump(mode="json")})
                    elif kind == "close":
                        return
                    else:
                        raise EnvError(
                            ErrorCode.UNKNOWN_TYPE,
                            f"Unknown message type: {kind!r} (reset, step, state or close)",
                        )
                except EnvError as exc:
                    await self._send_error(ws, exc)
        except WebSocketDisconnect:
            return
        except Exception as exc:
            log.exception("websocket session failed")
            with contextlib.suppress(Exception):
                await self._send_error(ws, EnvError(ErrorCode.EXECUTION_ERROR, client_error_text(exc, None)))
        finally:
            if episode is not None and not episode.done:
                await episode.close("the client closed the connection")
            with contextlib.suppress(Exception):
                await ws.close()

    @staticmethod
    async def _send_error(ws: WebSocket, exc: EnvError) -> None:
        await ws.send_json({"type": "error", "data": exc.payload()})

    # ---- HTTP -----------------------------------------------------------------------
    @staticmethod
    def _error(exc: EnvError) -> JSONResponse:
        return JSONResponse(
            {"detail": exc.message, "code": exc.code.value, **exc.extra}, status_code=exc.status
        )

    async def _body(self, request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EnvError(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from None

    def _http_episode(self, episode_id: Any) -> Episode:
        if not episode_id or not isinstance(episode_id, str):
            raise EnvError(
                ErrorCode.SESSION_ERROR,
                "episode_id is required: the id POST /reset returned (observation.episode_id)",
            )
        episode = self.http_episodes.get(episode_id)
        if episode is None:
            raise EnvError(ErrorCode.SESSION_ERROR, f"unknown episode {episode_id!r}: POST /reset first", 404)
        return episode

    async def http_reset(self, request: Request) -> JSONResponse:
        try:
            data = await self._body(request)
            if isinstance(data, dict) and data.get("episode_id") in self.http_episodes:
                raise EnvError(ErrorCode.VALIDATION_ERROR, f"episode {data['episode_id']!r} exists", 409)
            episode, result = await self.reset(data)
        except EnvError as exc:
            return self._error(exc)
        self.http_episodes[episode.id] = episode
        while len(self.http_episodes) > KEEP_FINISHED:
            oldest = next(iter(self.http_episodes))
            if not self.http_episodes[oldest].done:
                break
            self.http_episodes.pop(oldest)
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
        return JSONResponse(
            {
                "name": "tbx-thinkingbox",
                "description": "ThinkingBox-Bench tasks, one fresh tbx sandbox per episode; "
                "reward 1.0 when the end state matches the golden end state, else 0.0",
                "readme_content": None,
                "version": tbx_version,
                "author": None,
                "documentation_url": None,
                "dataset": str(host.bench.root),
                "tasks": len(host.tasks),
                "domains": host.domains,
                "max_episodes": host.opts.max_episodes,
                "active_episodes": len(host.episodes),
                "out": str(host.opts.out),
            }
        )

    async def schema(self, request: Request) -> JSONResponse:
        return JSONResponse(schemas())

    def app(self, guard: GuardPolicy | None = None) -> Starlette:
        """The ASGI app, behind bench.web_guard (default: loopback Host names, same origin, JSON POSTs)."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            await self.host.start()
            try:
                yield
            finally:
                await self.host.close()

        return Starlette(
            routes=[
                Route("/health", self.health, methods=["GET"]),
                Route("/metadata", self.metadata, methods=["GET"]),
                Route("/schema", self.schema, methods=["GET"]),
                Route("/ready", self.ready, methods=["GET"]),
                Route("/reset", self.http_reset, methods=["POST"]),
                Route("/step", self.http_step, methods=["POST"]),
                Route("/state", self.http_state, methods=["GET"]),
                WebSocketRoute("/ws", self.websocket),
            ],
            lifespan=lifespan,
            middleware=[Middleware(WebGuard, policy=guard or GuardPolicy())],
        )
