"""One OpenEnv episode = one tbx attempt, driven step by step by a remote agent.

    reset  -> a warm sandbox of the task's domain, seeded for the task; its
              canonical initial state; a session-proxy registration with the
              task's allow-list (whose tool listing the reset shows); an MCP
              client of the proxy; a reset's `prefix` (a fork's: its parent's calls so
              far first) replayed through the proxy (bench.run.prefix); the reset
              observation
    step   -> list_tools | call_tool (through the proxy: same allow-list, limits,
              recording as `tbx run`) | submit_message (to the simulated user)
    end    -> the conversation ends (the agent's <DONE> or end-turn tool, the
              user's stop token, a turn limit, the wall clock): terminal state,
              teardown, verdict against the golden end state (in this process),
              a result row; the terminal observation carries pass/fail

The attempt is held open by `bench.run.held.HeldAttempt` (as a Session API
session's is) around `bench.run.lifecycle.open_attempt`, the one lifecycle
`tbx run` uses too (checkout, initial dump, registration; the gone check,
terminal dump, teardown), which also notices a lost sandbox after each call.
The conversation's state and its turn rules are
`bench.rollout.conversation.Conversation`'s, as in tbx's agent loop. The MCP
session is entered and left by one task (`_live`), whichever requests
(WebSocket messages or HTTP calls, each in its own task) drive it; they reach
it through a queue.
The sandbox is torn down when the episode ends, when its client goes away
(`close`) or after `idle_timeout` seconds without a step. Infrastructure
failures (sandbox, proxy upstream, user model, judge, golden replay) end it
with `reward_type: system_error`, recorded in errors.jsonl, never as a 0.
An episode abandoned by its client is recorded as a system error too: it has
no end state an agent chose, so it must not count as a failure. A reset whose
sandbox did not come free within the provider's checkout wait
(`sandbox.CheckoutTimeout`) started no attempt: it is refused as at capacity
(CAPACITY_REACHED with `retry_after`), nothing is recorded and its repeat is free again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from bench.dataset import Task
from bench.defaults import RETRY_AFTER, TIMEOUTS
from bench.env.host import AGENT_NAME, EnvHost
from bench.env.protocol import (
    CallToolAction,
    EnvError,
    EpisodeState,
    EpisodeStatus,
    ErrorCode,
    ListToolsAction,
    Observation,
    SubmitMessageAction,
    ToolCallSpec,
    ToolErrorKind,
    ToolResult,
)
from bench.env.recording import verdict_metadata
from bench.llm.client import MODEL_WAIT, ContextLimitExceeded, ModelWait, UsageLedger
from bench.rollout.brief import task_brief
from bench.rollout.conversation import Conversation, LoopSpec, McpEndpointError, single_exception
from bench.rollout.prompts import agent_prompt, bot_instructions, default_prompt
from bench.rollout.trajectory import SYSTEM_ERROR, ToolCall, Trajectory, UserTurn
from bench.rollout.user_sim import LLMUser
from bench.run.attempt import AttemptOutcome, usage_of
from bench.run.causes import fault_of
from bench.run.client_errors import client_error_text
from bench.run.grading import grade
from bench.run.held import HeldAttempt, SandboxLost
from bench.run.prefix import PrefixCall, fork_calls, replay_prefix, replayed_results
from bench.run.recording import error_message, write_graded, write_system_error
from judge import AttemptRecord
from sandbox import CheckoutTimeout, ProxyCall, ResourceLimitHit, SandboxGoneError, new_id, proxy_client


class _Close:
    """Inbox item: the client went away."""

    def __init__(self, reason: str):
        self.reason = reason


class Abandoned(RuntimeError):
    """The client closed the episode (or let it idle out) before it ended."""


class _Finish(Exception):
    """Raised inside a step: the conversation is over (`reason` is a trajectory finish reason)."""

    def __init__(self, reason: str, **fields: Any):
        self.reason, self.fields = reason, fields


class Episode:
    """`prefix`: calls replayed through the proxy before the reset observation (checked
    against the task's allow-list by the server before this episode was made); `fork_of`:
    the episode they came from, when the episode is a fork (bench.run.prefix)."""

    def __init__(
        self,
        host: EnvHost,
        task: Task,
        repeat: int,
        episode_id: str | None = None,
        *,
        prefix: list[PrefixCall] | None = None,
        fork_of: str | None = None,
    ):
        self.host = host
        self.task = task
        self.repeat = repeat
        self.id = episode_id or new_id("ep")
        self.prefix = list(prefix or [])
        self.fork_of = fork_of
        self.attempt_id = new_id(f"{task.uid[:24]}-r{repeat}")
        self.phase: str = "starting"
        self.steps = 0
        self.reward: float | None = None
        self.reward_type: str | None = None
        self.last_activity = time.monotonic()
        self._inbox: asyncio.Queue[tuple[Any, asyncio.Future[Observation]]] = asyncio.Queue()
        self._actor: asyncio.Task[None] | None = None
        self._pending: asyncio.Future[Observation] | None = None
        self._run: Conversation | None = None
        self._held: HeldAttempt | None = None
        self._deadline = 0.0
        self.containers: dict[str, str] = {}

    # ---- the API the server calls ----------------------------------------------
    @property
    def done(self) -> bool:
        return self.phase in ("done", "closed")

    def state(self) -> EpisodeState:
        return EpisodeState(
            episode_id=self.id,
            step_count=self.steps,
            task_uid=self.task.id,
            status=self.status,
            done=self.done,
            reward=self.reward,
            reward_type=self.reward_type,  # type: ignore[arg-type]
            attempt_id=self.attempt_id,
            repeat=self.repeat,
            containers=self.containers,
        )

    @property
    def status(self) -> EpisodeStatus:
        if self.phase == "done":
            return "error" if self.reward_type == "system_error" else "done"
        if self.phase in ("closed", "finalizing"):
            return self.phase  # type: ignore[return-value]
        return "active"  # starting or running

    async def start(self) -> Observation:
        """Check out and seed the sandbox; the reset observation (or a terminal system error)."""
        ready: asyncio.Future[Observation] = asyncio.get_running_loop().create_future()
        self._pending = ready
        self.host.episodes[self.id] = self
        self._actor = asyncio.create_task(self._live())
        try:
            return await asyncio.shield(ready)
        except asyncio.CancelledError:
            # the client went away while the sandbox was starting
            await asyncio.shield(self.close("the client closed the connection during reset"))
            raise

    def calls_so_far(self) -> list[PrefixCall]:
        """The episode's calls so far (its own prefix, then its agent's), from the proxy's
        record, as a fork's prefix; SESSION_ERROR unless the episode is being played."""
        held = self._held
        if self.phase != "running" or held is None:
            state = "has ended" if self.done else "is not being played (still starting or finalizing)"
            raise EnvError(
                ErrorCode.SESSION_ERROR, f"episode {self.id} {state}: a fork is made from a live episode", 409
            )
        return fork_calls(held.live.calls())

    async def step(self, action: Any) -> Observation:
        if self.done:
            raise EnvError(
                ErrorCode.SESSION_ERROR,
                f"episode {self.id} has ended ({self.reward_type or 'closed'}); reset to start another",
                409,
            )
        fut: asyncio.Future[Observation] = asyncio.get_running_loop().create_future()
        self.last_activity = time.monotonic()
        self._inbox.put_nowait((action, fut))
        return await asyncio.shield(fut)

    async def close(self, reason: str) -> None:
        """Tear the episode down (recorded as abandoned when it had not ended)."""
        actor = self._actor
        if actor is None or actor.done():
            return
        if self.phase == "starting":
            actor.cancel()
        else:
            self._inbox.put_nowait((_Close(reason), asyncio.get_running_loop().create_future()))
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await actor

    # ---- the episode's own task ---------------------------------------------------
    async def _live(self) -> None:
        host, task = self.host, self.task
        record = AttemptRecord(
            task_id=task.id,
            attempt_id=self.attempt_id,
            run_id=host.run_id,
            repeat=self.repeat,
            domain=task.domain,
        )
        timings: dict[str, float] = {}
        # A task on its checkout's own servers has no golden calls (bench.run.grading.on_checkout_servers).
        checkout = host.bench.on_checkout_servers(task)
        golden_task = asyncio.create_task(_nothing() if checkout else host.golden.get(task))
        try:
            spec = await host.attempt_spec(task, self.repeat, self.attempt_id)
            outcome = AttemptOutcome.of(spec)
            timings = outcome.timings
            assert host.provider is not None and host.proxy is not None
            held = self._held = HeldAttempt(spec, host.provider, host.proxy, outcome=outcome)
            try:
                live = await held.open()
                self.containers = dict(live.lease.containers)
                try:
                    try:
                        async with proxy_client(live.registration) as client:
                            finish = await self._converse(client)
                    except BaseExceptionGroup as group:
                        raise single_exception(group) from group
                except BaseException as exc:
                    # the conversation is over: unregister, terminal dump, teardown follow,
                    # and the lifecycle's word on how it ended is what is raised
                    self.phase = "finalizing"
                    await held.end(exc)
                    raise
                self.phase = "finalizing"
                await held.end()
            except ResourceLimitHit:
                # The conversation failed on a loss the agent's own calls caused: its outcome
                # (outcome.resource_limit, graded below), not a system error.
                self.phase = "finalizing"
                finish = _Finish("agent_error")
                if self._run is not None and self._run.finish is None:
                    self._run.finish = "agent_error"
            except SandboxGoneError as exc:
                # The lifecycle's word for a lost sandbox; the episode's records say SandboxLost.
                if isinstance(exc, SandboxLost):
                    raise
                loss = str(exc).removeprefix(f"attempt {self.attempt_id}: ")
                raise SandboxLost(
                    str(exc).replace(f"attempt {self.attempt_id}", f"episode {self.id}", 1),
                    loss,
                    fault=exc.fault,
                ) from exc
            calls = outcome.prefix + outcome.calls  # every call that made the state
            # no terminal state only after the agent's own load took the database down
            assert self._run is not None
            assert checkout or outcome.terminal_state is not None or outcome.resource_limit is not None
            traj = self._trajectory()
            assert traj is not None
            outcome.trajectory = traj
            outcome.usage = usage_of(traj)
            t = time.monotonic()
            golden = await golden_task  # None on a checkout's own servers: its test function grades
            timings["golden_wait"] = time.monotonic() - t
            t = time.monotonic()
            graded = await grade(
                host.bench,
                task,
                golden,
                outcome.terminal_state,
                calls,
                initial=outcome.initial_state,
                final_message=traj.final_message,
                judge=host.judge,
                skip_rubrics=host.opts.skip_rubrics,
                resource_limit=outcome.resource_limit,
                functions=host.functions,
                trajectory=traj,
                attempt_id=self.attempt_id,
                server_effects=outcome.server_effects,
                init_results=outcome.init_results,
            )
            timings["judge"] = time.monotonic() - t
            write_graded(host.output, task, record, outcome, graded, timings, models=host.config)
            verdict = graded.verdict
            # A test function's reward (a number in [0, 1]) where the task has one, else pass/fail.
            self.reward = verdict.reward if verdict.reward is not None else (1.0 if verdict.passed else 0.0)
            self.reward_type = "pass" if verdict.passed else "fail"
            self._deliver(
                self._observation(
                    "terminal",
                    done=True,
                    reward=self.reward,
                    reward_type=self.reward_type,
                    finish_reason=finish.reason,
                    test_summary={"passed": verdict.passed, **verdict_metadata(verdict)},
                    metadata={"attempt_id": self.attempt_id, "repeat": self.repeat},
                    **finish.fields,
                )
            )
        except asyncio.CancelledError:
            self._record_error(record, Abandoned("the client went away during reset"), timings)
            raise
        except Abandoned as exc:
            self._record_error(record, exc, timings)
        except CheckoutTimeout as exc:
            # No sandbox came free within the checkout's wait: the server is at capacity and
            # no attempt started. The reset is refused as a full server's is, nothing is
            # recorded and the repeat may be played by a later reset.
            host.give_back_repeat(task, self.repeat)
            refused, self._pending = self._pending, None
            if refused is not None and not refused.done():
                refused.set_exception(
                    EnvError(
                        ErrorCode.CAPACITY_REACHED,
                        f"Server at capacity: no {task.domain} sandbox came free within "
                        f"{exc.waited:g} s. Retry later (or serve with a larger --warm).",
                        503,
                        retry_after=RETRY_AFTER,
                    )
                )
        except Exception as exc:
            message = client_error_text(exc, self.attempt_id)  # the full text: errors.jsonl only
            self._record_error(record, exc, timings)
            self.reward_type = "system_error"
            self._deliver(
                self._observation(
                    "terminal",
                    done=True,
                    reward_type="system_error",
                    system_error=message,
                    finish_reason=SYSTEM_ERROR,
                    metadata={"attempt_id": self.attempt_id, "repeat": self.repeat},
                )
            )
        finally:
            if not golden_task.done():
                golden_task.cancel()
            self.phase = "closed" if self.reward_type is None else "done"
            host.episodes.pop(self.id, None)
            self._fail_queued()
            # What the episode recorded is written: a client that keeps the ended episode
            # (its WebSocket session, `state`) must not keep its replies and states alive.
            self._run = None
            self._held = None

    async def _converse(self, client: Any) -> _Finish:
        """The reset observation, then steps from the inbox until the conversation ends."""
        host, task = self.host, self.task
        bench = host.bench
        prompt = agent_prompt(bench, default_prompt(bench))
        bot = bot_instructions(bench, task)
        # The remote agent is told what tbx's own LLM agent is told under the default prompt
        # (it answers its built-in tools itself); its trajectory names it AGENT_NAME.
        spec = LoopSpec.of(
            task_brief(bench, task, "llm"),
            agent=AGENT_NAME,
            wall_clock=host.opts.wall_clock,
            model_wait_factor=host.config.model_wait_factor,
            # the proxy's own limit answers first (and is recorded); this one only catches a lost reply
            call_timeout=host.opts.call_timeout + TIMEOUTS.reply_grace,
            seed=self.repeat,
        )
        ledger = UsageLedger()
        assert host.user_client is not None
        user = LLMUser(host.user_client, task.user_context, attempt_seed=self.repeat, ledger=ledger)
        run = Conversation(spec, None, user, ledger)  # the agent is remote
        self._run = run
        # What the proxy's tools/list answers, as its registration returned it: not asked again.
        assert self._held is not None
        listed = self._held.live.registration.listing
        tools = host.offered_tools(task, listed)
        run.tools_offered = [x["function"]["name"] for x in tools]
        run.add_user(UserTurn(index=0, source="query", text=task.query))
        # The prefix goes through the proxy before the agent has the episode: recorded as the
        # attempt's prefix, never as the agent's turns or the conversation's messages; the
        # reset observation tells the agent each call's result (metadata `prefix`).
        extra: dict[str, Any] = {}
        if self.prefix or self.fork_of is not None:
            assert self._held is not None
            t = time.monotonic()
            replayed = await replay_prefix(self._held, self.prefix)
            self._held.outcome.timings["prefix"] = time.monotonic() - t
            extra = {"prefix": replayed_results(replayed), "fork_of": self.fork_of}
        self._deadline = time.monotonic() + host.opts.wall_clock
        self.phase = "running"
        self._deliver(
            self._observation(
                "reset",
                task=task.query,
                system_instructions=prompt.system_instructions,
                bot_instructions=bot,
                tools=tools,
                messages=[m.to_openai() for m in run.messages],
                **extra,
            )
        )
        while True:
            action, fut = await self._next()
            self._pending = fut
            self.steps += 1
            try:
                obs = await self._step(client, run, tools, action)
            except _Finish as finish:
                run.finish = finish.reason  # type: ignore[assignment]
                return finish
            self._deliver(obs)

    async def _next(self) -> tuple[Any, asyncio.Future[Observation]]:
        idle = self.host.opts.idle_timeout
        try:
            action, fut = await asyncio.wait_for(self._inbox.get(), timeout=idle)
        except TimeoutError:
            raise Abandoned(f"no step for {idle:g} s (idle timeout)") from None
        if isinstance(action, _Close):
            fut.cancel()
            raise Abandoned(action.reason)
        return action, fut

    async def _step(
        self, client: Any, run: Conversation, tools: list[dict[str, Any]], action: Any
    ) -> Observation:
        if isinstance(action, ListToolsAction):
            return self._observation("tools", tools=tools)
        if time.monotonic() > self._deadline:
            raise _Finish("timeout")
        if run.out_of_turns():
            raise _Finish("agent_limit")
        if isinstance(action, CallToolAction):
            run.agent_turns += 1
            results = await self._call_batch(client, run, action.calls())
            if action.parallel_tool_calls is None:
                r = results[0]
                return self._observation(
                    "tool",
                    call_id=r.call_id,
                    tool_name=r.name,
                    tool_result=r.tool_result,
                    tool_error=r.tool_error,
                )
            return self._observation("tool_batch", tool_results=results)
        assert isinstance(action, SubmitMessageAction)
        return await self._submit(client, run, action)

    async def _submit(self, client: Any, run: Conversation, action: SubmitMessageAction) -> Observation:
        if not action.content.strip() and not action.terminal_tool_calls:
            self.steps -= 1
            return self._observation("error", error="submit_message needs content or terminal_tool_calls")
        run.agent_turns += 1
        before = await self._call_batch(client, run, action.tool_calls_before_content, content=action.content)
        extra: dict[str, Any] = {"response": action.content, "tool_results": before or None}
        if not action.tool_calls_before_content:
            run.add_assistant(action.content)
        if action.terminal_tool_calls:
            for spec in action.terminal_tool_calls:
                run.tool_calls.append(
                    ToolCall(
                        index=len(run.tool_calls),
                        call_id=spec.call_id,
                        tool=spec.name,
                        arguments=spec.arguments if isinstance(spec.arguments, dict) else None,
                        via_mcp=False,
                        builtin=True,
                        agent_turn=run.agent_turns,
                    )
                )
            run.done_by = action.terminal_tool_calls[0].name
            raise _Finish("done", **extra)
        if run.said_done(action.content):
            raise _Finish("done", **extra)
        finish = await self._user_reply(run)
        if finish == "user_limit":
            raise _Finish("user_limit", **extra)
        reply = run.user_turns[-1].text
        if finish == "user_done":
            raise _Finish("user_done", user_message=reply, **extra)
        return self._observation("user", user_message=reply, **extra)

    async def _user_reply(self, run: Conversation) -> str | None:
        """The simulated user's answer; the time its model endpoint takes is not the agent's:
        the wall clock's deadline moves on by it (`timings.model_wait`), up to the episode's
        bound on model wait (`model_wait_factor` wall clocks; past it, ModelWaitExceeded)."""
        limit = run.spec.wall_clock * run.spec.model_wait_factor - run.timings.get("model_wait", 0.0)
        waited = ModelWait(limit=limit)
        token = MODEL_WAIT.set(waited)
        try:
            return await run.user_reply()
        except ContextLimitExceeded as exc:
            raise exc.endpoint_error() from exc
        finally:
            MODEL_WAIT.reset(token)
            self._deadline += waited.seconds
            run.timings["model_wait"] = run.timings.get("model_wait", 0.0) + waited.seconds

    async def _call_batch(
        self, client: Any, run: Conversation, calls: list[ToolCallSpec], content: str | None = None
    ) -> list[ToolResult]:
        """Run calls in order through the proxy, recording them as the agent loop does."""
        if not calls:
            return []
        raws = [c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments or {}) for c in calls]
        ids = run.add_assistant(
            content, [(c.call_id, c.name, raw) for c, raw in zip(calls, raws, strict=True)]
        )
        results = []
        for call_id, spec, raw in zip(ids, calls, raws, strict=True):
            if spec.parse_error is not None:
                text = f"the tool call could not be parsed: {spec.parse_error[:500]}"
                results.append(
                    ToolResult(call_id=call_id, name=spec.name, tool_result=text, tool_error="invalid_args")
                )
            else:
                results.append(await self._call(client, run, call_id, spec.name, raw))
            run.add_tool_reply(call_id, spec.name, results[-1].tool_result)
        return results

    async def _call(self, client: Any, run: Conversation, call_id: str, name: str, raw: str) -> ToolResult:
        held = self._held
        assert held is not None
        mark = held.recorded()
        rec = await run.call_tool(client, call_id, name, raw)
        # A slow or failed tool is the agent's to see; a dead container is not (SandboxLost),
        # unless the attempt's own calls drove it over its limit: then the agent reads the
        # tool error and the episode ends a failure (bench.run.lifecycle).
        new = await held.check_call(name, mark, sent=rec.via_mcp)
        return ToolResult(
            call_id=call_id, name=name, tool_result=rec.result, tool_error=_tool_error(rec, new)
        )

    # ---- helpers --------------------------------------------------------------------
    def _observation(self, kind: str, **fields: Any) -> Observation:
        return Observation.build(
            kind,
            episode_id=self.id,
            task_uid=self.task.id,
            steps_taken=self.steps,
            **fields,
        )

    def _deliver(self, obs: Observation) -> None:
        fut, self._pending = self._pending, None
        if fut is not None and not fut.done():
            fut.set_result(obs)
        self.last_activity = time.monotonic()

    def _fail_queued(self) -> None:
        error = EnvError(ErrorCode.SESSION_ERROR, f"episode {self.id} has ended; reset to start another", 409)
        if self._pending is not None and not self._pending.done():
            self._pending.set_exception(error)
        while not self._inbox.empty():
            _, fut = self._inbox.get_nowait()
            if not fut.done():
                fut.set_exception(error)

    def _trajectory(self) -> Trajectory | None:
        """The conversation so far, its spend priced as `tbx run` prices it (the models config)."""
        if self._run is None:
            return None
        traj = self._run.trajectory()
        traj.cost_usd = self._run.ledger.cost(self.host.config)
        return traj

    def _record_error(self, record: AttemptRecord, exc: BaseException, timings: dict[str, float]) -> None:
        partial = getattr(exc, "trajectory", None)
        if self._run is not None and self._run.finish is None:
            self._run.finish = SYSTEM_ERROR  # the conversation did not end: tbx's side failed
        traj = self._trajectory() or (partial if isinstance(partial, Trajectory) else None)
        write_system_error(
            self.host.output, self.task, record, traj, *error_message(exc), timings, fault=fault_of(exc)
        )


def _tool_error(rec: ToolCall, calls: list[ProxyCall]) -> ToolErrorKind | None:
    if not rec.via_mcp:
        return "invalid_args"  # the arguments were not a JSON object: nothing was sent
    outcome = calls[-1].outcome if calls else None
    if outcome == "refused":
        return "tool_not_found"
    if outcome == "protocol_error" or (rec.is_error and "validation error" in rec.result.lower()):
        return "invalid_args"
    if rec.is_error or rec.error_envelope:
        return "execution_error"
    return None


__all__ = ["Episode", "McpEndpointError"]


async def _nothing() -> None:
    return None
