"""The session table: create, look up, destroy, idle expiry, and each session's
one FIFO of operations with the reference's two limits.

A session is one tbx attempt, held open between requests by
`bench.run.held.HeldAttempt` (as an OpenEnv episode's is): its sandbox is
checked out, seeded and registered with tbx's tool proxy at create, and
torn down at destroy. A lost sandbox is noticed per call by the held attempt's
one rule and answered as the reference answers a failed call (400; 500 for
/get_effects), naming the loss. A tool call goes through
tbx's proxy in process (`ProxyServer.acall`: the proxy's checks and recording,
posted straight to the sandbox's server over the session's own keep-alive
connections on this loop), so no MCP session object is shared between request
tasks and no loopback hop is paid; `/mcp/` (app.py) is relayed to the proxy's
MCP endpoint over HTTP.

Limits (T = the session's `timeout`): an operation runs at most T seconds, and
a request waits at most T + 2 seconds from the moment it was queued. Unlike
the reference, an operation whose wait ran out while it was still queued is
dropped, never executed later (the clients retry a 504 by re-sending it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import mcp_types as types

from bench.dataset import Benchmark
from bench.prepare import checkout_servers_of
from bench.run.attempt import AttemptOutcome, AttemptSpec
from bench.run.held import HeldAttempt, SandboxLost
from bench.run.lifecycle import LiveAttempt
from bench.run.prefix import (
    PrefixCall,
    PrefixInvalid,
    PrefixRefused,
    check_prefix,
    fork_calls,
    replay_prefix,
    replayed_results,
)
from bench.session_api.admission import AtCapacity, SessionAdmission
from bench.session_api.golden_cache import GoldenCache
from bench.session_api.models import INVALID_INPUT, NO_SESSION, ApiError, CreateBody, ServerToolArgs
from bench.session_api.schemas import SchemaError, normalise_schema
from bench.session_api.server_config import SessionServer, check_tools, parse_entry
from judge import GoldenState, State, effects_object, json_safe
from sandbox import (
    RESERVED_PREFIX,
    CheckoutTimeout,
    ProxyServer,
    SandboxGoneError,
    SandboxProvider,
    ToolPolicy,
    UpstreamPool,
    new_id,
    server_effects,
)
from servers.registry import server_to_domain

log = logging.getLogger(__name__)

T = TypeVar("T")

SERVER_TOOL = "__reserved__server_tool"
GETEFFECTS = "__reserved__geteffects"
QUEUE_GRACE = 2.0  # seconds a request may wait beyond T (the reference's total wait limit)
AGENT_NAME = "session-api"


class QueueTimeout(Exception):
    """The operation's wait or run exceeded the session's limits (answered 504)."""


def _gone(lost: SandboxLost, status: int = 400) -> ApiError:
    """A lost sandbox as the session's answer: its calls are refused with the cause."""
    return ApiError(
        f"the session's sandbox is gone ({lost.loss}); destroy the session and create a new one", status
    )


class Session:
    def __init__(self, session_id: str, body: CreateBody):
        self.id = session_id
        self.timeout = body.timeout
        self.always_json = body.always_json_output
        self.proxy_info = body.geteffects_proxy_info
        self.available = list(body.available_tools)
        self.server_config = body.server_config  # what a fork of it must name again
        self.info: dict[str, Any] = {}
        self.last_activity = time.time()
        self.entry: SessionServer | None = None
        # The checkout's own server the session runs (servers.yaml, no tbx domain), if so:
        # then there is no golden material, and /get_effects is the server's own effects.
        self.checkout: str | None = None
        self.task_id = f"session:{session_id}"
        self.held: HeldAttempt | None = None
        self.live: LiveAttempt | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.logged: list[dict[str, Any]] = []
        self.golden: GoldenState | None = None
        # Keep-alive connections to the sandbox's server for `ProxyServer.acall` (on this loop).
        self.pools: dict[str, UpstreamPool] = {}
        self.created = False  # /session_create finished (idle expiry only takes these)
        self._queue = asyncio.Lock()  # FIFO: asyncio's lock wakes waiters in arrival order

    @property
    def outcome(self) -> AttemptOutcome | None:
        """The attempt's record (once it opened): states, calls, timings."""
        return self.held.outcome if self.held is not None and self.live is not None else None

    @property
    def error(self) -> BaseException | None:
        """Why the attempt ended abnormally (the lifecycle's last word), else None."""
        return self.held.error if self.held is not None else None

    def touch(self) -> None:
        self.last_activity = time.time()

    # ---- the queue -----------------------------------------------------------------
    async def run(self, op: Callable[[], Awaitable[T]], *, activity: bool = True) -> T:
        """`op` behind every earlier operation of this session, within the limits: it
        runs at most T s once started, and the caller waits at most T + 2 s from now.
        A wait that runs out while `op` runs answers 504 and lets it finish (as the
        reference's worker does); one that runs out while `op` is queued drops it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout + QUEUE_GRACE
        if activity:
            self.touch()
        try:
            async with asyncio.timeout_at(deadline):
                await self._queue.acquire()
        except TimeoutError:
            raise QueueTimeout() from None  # never acquired: the operation is dropped, not run later
        running = asyncio.ensure_future(self._execute(op, activity))
        running.add_done_callback(_retrieve)  # its caller may have stopped waiting
        try:
            return await asyncio.wait_for(asyncio.shield(running), max(deadline - loop.time(), 0.0))
        except TimeoutError:
            raise QueueTimeout() from None

    async def _execute(self, op: Callable[[], Awaitable[T]], activity: bool) -> T:
        try:
            async with asyncio.timeout(self.timeout):
                return await op()
        except TimeoutError:
            raise QueueTimeout() from None
        finally:
            self._queue.release()
            if activity:
                self.touch()

    # ---- the attempt ------------------------------------------------------------------
    async def open(self, spec: AttemptSpec, provider: SandboxProvider, proxy: ProxyServer) -> None:
        self.held = HeldAttempt(spec, provider, proxy)
        try:
            self.live = await self.held.open()
        except CheckoutTimeout as exc:  # no sandbox within the checkout's wait: refused as admission does
            raise AtCapacity(f"Server at capacity: {exc}; retry later, or destroy sessions") from exc

    async def close(self, error: BaseException | None = None) -> None:
        """Tear the attempt down (its terminal state is dumped unless `error`)."""
        if self.held is not None:
            await self.held.close(error)
        pools, self.pools = self.pools, {}
        for pool in pools.values():
            await pool.aclose()


class SessionTable:
    def __init__(
        self,
        bench: Benchmark,
        provider: SandboxProvider,
        proxy: ProxyServer,
        golden: GoldenCache,
        *,
        run_id: str,
        images: Callable[[], dict[str, str]],
        on_closed: Callable[[Session], Awaitable[None]] | None = None,
        admission: SessionAdmission | None = None,
    ):
        self.bench = bench
        self.provider = provider
        self.proxy = proxy
        self.golden = golden
        self.run_id = run_id
        self._images = images
        self.on_closed = on_closed
        self.admission = admission  # the cap and memory (bench.session_api.admission)
        self.sessions: dict[str, Session] = {}
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=None), limits=httpx.Limits(max_keepalive_connections=64)
        )

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise ApiError(NO_SESSION)
        return session

    # ---- create ----------------------------------------------------------------------
    async def create(self, body: CreateBody) -> dict[str, Any]:
        if body.session_id in self.sessions:
            raise ApiError("Session already exists")
        if self.admission is not None:  # the count at once, memory once the domain is known
            self.admission.check_count(len(self.sessions))
            self.admission.check_queue(body.timeout)
        session = Session(body.session_id, body)
        self.sessions[body.session_id] = session  # visible at once: a second create is refused
        try:
            # Not bounded by the session's `timeout` (the reference bounds each step by it):
            # a boot on a loaded machine may take longer, and the sandbox's own start
            # timeout bounds it.
            result = await self._init(session, body)
            session.created = True
            session.touch()
            if self.admission is not None:
                live = session.live
                self.admission.created(session, live.lease.containers if live is not None else None)
            return result
        except BaseException as exc:
            self.sessions.pop(body.session_id, None)
            await session.close(exc)
            if self.admission is not None:
                self.admission.release(session)
            raise

    async def _init(self, session: Session, body: CreateBody) -> dict[str, Any]:
        servers = list(body.server_config)
        if len(servers) > 1:
            raise ApiError(
                f"tbx runs one server per session; server_config names {len(servers)}: {', '.join(servers)}"
            )
        if not servers:
            check_tools(None, body.available_tools)
            return {}
        name = servers[0]
        if name in self.bench.checkout_servers and name not in server_to_domain():
            return await self._init_checkout(session, body, name)
        entry = await asyncio.to_thread(parse_entry, self.bench, name, body.server_config[name])
        check_tools(entry, body.available_tools)
        session.entry = entry
        prefix = await self._prefix(session, body)  # checked before any container
        if self.admission is not None:
            await self.admission.admit(session, entry)  # or AtCapacity, before any container
        golden = asyncio.ensure_future(self.golden.get(entry))  # concurrently with the boot
        try:
            await session.open(self._spec(session, entry), self.provider, self.proxy)
            session.golden = await golden
        except BaseException:
            golden.cancel()
            with contextlib.suppress(BaseException):
                await golden
            raise
        session.tools = await self._visible_tools(session)
        if body.prefix is None and body.fork_of is None:
            return {name: {}}
        # Replayed through the session's proxy registration before the create answers: the
        # session's record keeps them as its prefix; the answer says what each returned.
        assert session.held is not None
        replayed = await replay_prefix(session.held, prefix)
        return {name: {"prefix": replayed_results(replayed)}}

    async def _init_checkout(self, session: Session, body: CreateBody, name: str) -> dict[str, Any]:
        """A session on one of the checkout's own servers: its server_config entry is the
        world state its __reserved__init gets; the answer is the init result."""
        if body.prefix is not None or body.fork_of is not None:
            raise ApiError(
                f"{INVALID_INPUT}: prefix and fork_of are not supported on a checkout server ({name})"
            )
        world_state = body.server_config[name]
        if not isinstance(world_state, dict):
            raise ApiError(INVALID_INPUT)
        servers = await asyncio.to_thread(checkout_servers_of, self.bench, {name: world_state})
        spec = AttemptSpec(
            run_id=self.run_id,
            attempt_id=new_id(f"sess-{name}"),
            task_id=session.task_id,
            domain=name,
            repeat=0,
            agent=AGENT_NAME,
            images=self._images(),
            typesense=False,
            checkout_servers=servers,
            tool_policy=ToolPolicy(allowed_tools=session.available),
        )
        session.checkout = name
        await session.open(spec, self.provider, self.proxy)
        live = session.live
        assert live is not None
        handle = live.lease.handle
        offered = {t["name"] for t in (handle.tools.get(name, []) if handle is not None else [])}
        for tool in session.available:
            if tool not in offered:
                raise ApiError(f"Tool {tool} does not exist")
        session.tools = await self._visible_tools(session)
        return {name: live.outcome.init_results.get(name, {})}

    async def _checkout_effects(self, session: Session, lost_status: int) -> dict[str, Any]:
        held = self._check_alive(session, lost_status)
        handle = held.live.lease.handle
        assert handle is not None and session.checkout is not None
        effects = await asyncio.to_thread(
            server_effects,
            handle.checkout_servers,
            handle.servers,
            handle.upstream_secret,
            held.live.lease.interface,
        )
        return dict(effects[session.checkout])

    async def _prefix(self, session: Session, body: CreateBody) -> list[PrefixCall]:
        """The calls a create replays: a fork's parent's calls so far (taken behind the
        parent's queued operations), then the body's `prefix`; a 400 naming the problem
        when a tool is not in `available_tools` or the parent is not a live session of the
        same server_config and tools."""
        prefix = list(body.prefix or [])
        if body.fork_of is not None:
            parent = self.sessions.get(body.fork_of)
            if parent is None or not parent.created or parent.held is None or parent.live is None:
                raise ApiError(f"fork_of: no live session {body.fork_of[:80]!r} with a sandbox to fork")
            if parent.server_config != body.server_config or set(parent.available) != set(session.available):
                raise ApiError(
                    "fork_of: a fork plays its parent's server_config and available_tools; send the same ones"
                )
            live = parent.live
            try:
                inherited = await parent.run(lambda: _calls_of(live), activity=False)
            except QueueTimeout:
                raise ApiError(f"fork_of: session {body.fork_of[:80]!r} stayed busy; retry") from None
            prefix = inherited + prefix
        try:
            check_prefix(prefix, ToolPolicy(allowed_tools=session.available))
        except (PrefixRefused, PrefixInvalid) as exc:
            raise ApiError(f"{INVALID_INPUT}: {exc}") from None
        return prefix

    def _spec(self, session: Session, entry: SessionServer) -> AttemptSpec:
        return AttemptSpec(
            run_id=self.run_id,
            attempt_id=new_id(f"sess-{entry.domain}"),
            task_id=session.task_id,
            domain=entry.domain,
            repeat=0,
            agent=AGENT_NAME,
            images=self._images(),
            seed=entry.rows,
            policy_sources=entry.sources,
            tool_policy=ToolPolicy(allowed_tools=session.available),
        )

    async def _visible_tools(self, session: Session) -> dict[str, dict[str, Any]]:
        """The session's tools in the server's listing order (not available_tools order)."""
        live = session.live
        assert live is not None
        if not session.available:
            return {}
        # What the proxy's tools/list answers, as its registration returned it: not asked again.
        listed = [types.Tool.model_validate(t) for t in live.registration.listing]
        wanted = set(session.available)
        out: dict[str, dict[str, Any]] = {}
        for tool in listed:
            if tool.name in wanted:
                try:
                    schema = normalise_schema(dict(tool.input_schema))
                except SchemaError as exc:
                    raise ApiError(str(exc)) from None
                out[tool.name] = {"description": tool.description, "inputSchema": schema}
        return out

    # ---- calls ----------------------------------------------------------------------
    async def call_tool(self, session: Session, name: str, arguments: dict[str, Any]) -> str:
        if name == SERVER_TOOL:
            return await self._server_tool(session, arguments)
        if name not in session.tools or name.startswith(RESERVED_PREFIX):
            raise ApiError(f"Tool {name} does not exist")
        text = await session.run(lambda: self._call(session, name, arguments))
        if session.always_json:
            text = _json_output(text)
        if session.proxy_info:
            session.logged.append({"tool_name": name, "arguments": arguments, "response": text})
        return text

    async def _server_tool(self, session: Session, arguments: dict[str, Any]) -> str:
        from pydantic import ValidationError

        try:
            wrapped = ServerToolArgs.model_validate(arguments)
        except ValidationError as exc:
            raise ApiError(str(exc)) from None
        server = session.entry.server if session.entry is not None else session.checkout
        missing = ApiError(f"Tool {wrapped.server_name} > {wrapped.tool_name} does not exist")
        if wrapped.server_name != server:
            raise missing
        if wrapped.tool_name == GETEFFECTS:  # answered host-side, like /get_effects
            read = self._checkout_effects if session.checkout is not None else self._server_effects
            effects = await session.run(lambda: read(session, 400))
            text = json.dumps(effects)
        elif wrapped.tool_name in session.tools:
            text = await session.run(lambda: self._call(session, wrapped.tool_name, wrapped.arguments))
        else:
            # Hidden and reserved tools stay unreachable: nothing passes tbx's allow-list.
            raise missing
        if session.always_json:
            text = _json_output(text)
        if session.proxy_info:
            session.logged.append({"tool_name": SERVER_TOOL, "arguments": arguments, "response": text})
        return text

    def _check_alive(self, session: Session, status: int = 400) -> HeldAttempt:
        """The session's attempt, unless the infrastructure lost its sandbox (answered with
        the cause). A loss the session's own calls caused is theirs: calls answer its tool
        error, effects are read as far as they can be (bench.run.lifecycle)."""
        held = session.held
        if held is None or session.live is None:
            raise ApiError("the session has no sandbox (its server_config named no server)")
        try:
            held.check_alive()
        except SandboxLost as lost:
            raise _gone(lost, status) from None
        return held

    async def _call(self, session: Session, name: str, arguments: dict[str, Any]) -> str:
        held = self._check_alive(session)
        mark = held.recorded()
        try:
            try:
                reply = await self.proxy.acall(held.live.token, name, arguments, session.pools)
            except SandboxGoneError as exc:  # the watch saw the loss: say so
                await held.check_call(name, mark)
                raise held.lose(f"tool call {name}", str(exc), exc.fault) from None
            # A failed or error reply may be a dead container's doing: a server whose database
            # was killed mid-call answers its ordinary error object. The loss is the answer (400).
            await held.check_call(name, mark)
        except SandboxLost as lost:
            raise _gone(lost) from None
        message = reply.message
        if reply.status != 200 or message is None:
            text = reply.body.decode(errors="replace")[:500]
            raise ApiError(f"tool call {name} failed: HTTP {reply.status}: {text}")
        if "error" in message:
            error = message["error"]
            raise ApiError(str(error.get("message", error) if isinstance(error, dict) else error))
        result = message.get("result") or {}
        content = result.get("content") or []
        if not content or content[0].get("type") != "text":
            raise ApiError("Internal Server Error", 500)  # the reference's answer to a result without text
        return str(content[0].get("text", ""))

    # ---- effects --------------------------------------------------------------------
    async def get_effects(self, session: Session) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if session.checkout is not None:
            out[session.checkout] = await session.run(lambda: self._checkout_effects(session, 500))
        if session.entry is not None:
            # Spec §3.5: effects that cannot be read are a 500 (a tool call's failure is a 400).
            out[session.entry.server] = await session.run(lambda: self._server_effects(session, 500))
        if session.proxy_info:  # arguments as sent: a NaN token a client wrote answers as "NaN"
            out["__reserved__proxy_info"] = {"tool_calls": json_safe(list(session.logged))}
        return out

    async def _server_effects(self, session: Session, lost_status: int) -> dict[str, Any]:
        held = self._check_alive(session, lost_status)
        live = held.live
        entry, golden = session.entry, session.golden
        assert entry is not None and golden is not None and live.outcome.initial_state is not None
        result: State | None
        try:
            result = await live.dump_state()
        except Exception as exc:
            loss = await live.loss()
            if loss is None:
                raise ApiError(f"reading the session's state failed: {exc}", 500) from None
            if not loss.agent_load:
                held.lose("reading the state", loss.cause, loss.fault)  # the session ends as this loss
                raise ApiError(f"the session's sandbox is gone ({loss.cause})", lost_status) from None
            result = None  # its own calls took the database down: effects without a result state
        return effects_object(
            live.outcome.initial_state,
            result,
            golden.final_state,
            rubrics=entry.rubrics,
            rubrics_yesno=entry.rubrics_yesno,
        )

    # ---- destroy ----------------------------------------------------------------------
    async def destroy(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise ApiError(NO_SESSION)
        await self._teardown(session)

    async def _teardown(self, session: Session) -> None:
        # Behind what the session still runs (bounded like any operation), then the attempt goes.
        with contextlib.suppress(QueueTimeout):
            await session.run(_nothing)
        # The infrastructure's loss ends the session as a system error (the lifecycle asks the
        # proxy; a loss raised to a call is remembered); one its own calls caused is graded a
        # failure (bench.session_api.record).
        await session.close()
        if self.admission is not None:
            self.admission.release(session)
        if self.on_closed is not None and session.entry is not None:
            try:
                await self.on_closed(session)
            except Exception:
                log.exception("recording session %s failed", session.id)

    async def destroy_all(self) -> None:
        while self.sessions:
            session_id = next(iter(self.sessions))
            with contextlib.suppress(ApiError):
                await self.destroy(session_id)

    async def garbage_collect(self, inactivity_minutes: float) -> list[str]:
        cutoff = time.time() - inactivity_minutes * 60.0
        idle = [s.id for s in self.sessions.values() if s.created and s.last_activity < cutoff]
        done = []
        for session_id in idle:
            with contextlib.suppress(ApiError):
                await self.destroy(session_id)
                done.append(session_id)
        return done

    async def aclose(self) -> None:
        await self.destroy_all()
        await self.http.aclose()


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


async def _nothing() -> None:
    return None


async def _calls_of(live: LiveAttempt) -> list[PrefixCall]:
    """A live session's calls so far (its proxy's record) as a fork's prefix."""
    return fork_calls(live.calls())


def _json_output(text: str) -> str:
    """`always_json_output`: JSON text unchanged, anything else wrapped as {"result": text}
    the way Python's default json.dumps writes it (non-ASCII escaped)."""
    try:
        json.loads(text)
        return text
    except ValueError:
        return json.dumps({"result": text})
