"""One attempt's conversation: an agent, a (simulated) user and an MCP endpoint.

    traj = await run_attempt_agent("oracle", task, bench, mcp_url, headers)
    traj = await run_attempt_agent("think", task, bench, mcp_url, headers, config=models, seed=3)
    traj = await run_agent(spec.brief, mcp_url, headers, ...)   # what an attempt spec carries

What the loop knows of the task is its `TaskBrief` (bench.rollout.brief): built
here from a loaded dataset by `run_attempt_agent`, or shipped in an attempt spec.

The endpoint is any MCP (streamable HTTP) URL: the tool proxy's (with its
`Authorization: Bearer <token>` header) or, in tests, a sandbox server's.
The agent sees the agent definition's system prompt, then the scenario's (and
the task's) bot instructions, then the task's query as the first user turn.
Its tools are the endpoint's tools (MCP schemas in OpenAI function form, with
the scenario's description overrides) plus the agent definition's built-in
tools, which end the turn and are answered locally.

The conversation ends when

- the agent's text ends with `<DONE>`, or it calls an end-turn tool: `done`;
- the simulated user writes its stop token: `user_done`;
- the agent takes `max_agent_sim_turns` steps (a step is one completion, text
  or a batch of tool calls): `agent_limit`;
- the user would need to answer more than `max_user_sim_turns` times: `user_limit`;
- the attempt's wall clock runs out: `timeout` (it stops while tbx waits on a model
  endpoint: that time is `timings.model_wait`, the endpoint's, never the agent's; it has
  its own bound, `model_wait_factor` wall clocks (the models config's, else
  bench.defaults'), past which the attempt
  is a system error, `ModelWaitExceeded`, the request in flight let finish and recorded);
- the agent returns an empty completion: `agent_error`;
- the agent's endpoint refuses the conversation as longer than the model's context:
  `context_limit` (the agent filled its own context; a new try would fill it again).

Every tool call goes through MCP and is recorded, reply included. Whatever
the model emits is the model's responsibility: argument text that is not a
JSON object (invalid JSON, NaN, too deep, too large, lone UTF-16 surrogates)
and tool names that cannot be sent get an error reply the model sees
(recorded with `via_mcp` False) and the attempt goes on; unknown tools are
answered by the endpoint. With the `approval` harness a destructive call
first waits for the simulated user's answer and, refused, is answered with a
tool error instead (also `via_mcp` False; bench.rollout.harness.approval).
A model endpoint that stays down raises
`ModelEndpointError`, an MCP endpoint that fails raises `McpEndpointError`;
both carry the partial trajectory in `.trajectory` (finish reason
`system_error`, its tokens priced: system errors are never a score, but spend).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mcp import Client

from bench.dataset import Benchmark, Task
from bench.defaults import TIMEOUTS, WALL_CLOCK
from bench.harness_names import APPROVAL, STATE_CHECK, parse_harness
from bench.llm.client import (
    MODEL_WAIT,
    ContextLimitExceeded,
    LLMClient,
    ModelEndpointError,
    ModelWait,
    UsageLedger,
)
from bench.llm.config import ModelsConfig, ModelsConfigError
from bench.rollout.agents import BUILTIN_AGENTS, AgentPolicy, AgentScript, LLMAgent, PlanAgent, ScriptedUser
from bench.rollout.agents.base import REPLAY_FINAL
from bench.rollout.agents.noop import noop_agent
from bench.rollout.brief import REPLAYING_AGENTS, SCRIPTED_AGENT, TaskBrief, task_brief
from bench.rollout.clients import AgentClients, mcp_client
from bench.rollout.conversation import (
    Conversation,
    LoopSpec,
    McpEndpointError,
    single_exception,
)
from bench.rollout.harness.approval import needs_approval, question, refusal
from bench.rollout.harness.hook import tool_message
from bench.rollout.harness.state_check import EXTRA_TURNS, EffectsProbe, check_turn
from bench.rollout.tools import apply_overrides, mcp_tool_to_openai, parse_arguments
from bench.rollout.trajectory import SYSTEM_ERROR, ToolCall, Trajectory, UserTurn
from bench.rollout.user_sim import ApprovingUser, LLMUser, UserPolicy
from sandbox import list_all_tools, recorded_argument_text

__all__ = ["agent_turn", "call_tool", "converse", "run_agent", "run_attempt_agent", "run_loop", "state_check"]


def _agent(run: Conversation) -> AgentPolicy:
    assert run.agent is not None, "tbx's loop drives a conversation with its own agent"
    return run.agent


async def agent_turn(run: Conversation, client: Client, tools: list[dict[str, Any]]) -> str:
    """Steps until the agent talks to the user: "user", or a finish reason."""
    while True:
        if run.out_of_turns():
            return "agent_limit"
        t = time.perf_counter()
        step = await _agent(run).step(run.system + [m.to_openai() for m in run.messages], tools)
        run.timings["agent"] += time.perf_counter() - t
        run.agent_turns += 1
        if not step.tool_calls:
            text = step.content or ""
            if not text.strip():
                run.error = "the agent returned an empty completion"
                return "agent_error"
            run.add_assistant(text)
            return "done" if run.said_done(text) else "user"
        ids = run.add_assistant(step.content, [(tc.id, tc.name, tc.arguments) for tc in step.tool_calls])
        enders = [tc.name for tc in step.tool_calls if tc.name in run.spec.end_turn_tools]
        for call_id, tc in zip(ids, step.tool_calls, strict=True):
            if enders:
                # an end-turn tool stops the step before anything else in it runs
                builtin = tc.name in run.spec.end_turn_tools
                rec = ToolCall(
                    index=len(run.tool_calls),
                    call_id=call_id,
                    tool=tc.name,
                    arguments=parse_arguments(tc.arguments)[0],
                    arguments_raw=recorded_argument_text(tc.arguments),
                    via_mcp=False,
                    builtin=builtin,
                    is_error=not builtin,
                    result="" if builtin else "Error: not executed, the agent ended the conversation",
                    agent_turn=run.agent_turns,
                )
                run.tool_calls.append(rec)
            else:
                rec = await call_tool(run, client, call_id, tc.name, tc.arguments, tools)
            run.add_tool_reply(call_id, tc.name, tool_message(run.spec.harness, rec))
        if enders:
            run.done_by = enders[0]
            return "done"


async def call_tool(
    run: Conversation, client: Client, call_id: str, name: str, raw: str, tools: list[dict[str, Any]]
) -> ToolCall:
    """One of the agent's calls. approval (bench.rollout.harness.approval): a destructive call
    waits for the simulated user's answer; sent on a yes, answered with a tool error on a no."""
    if APPROVAL not in run.spec.harness:
        return await run.call_tool(client, call_id, name, raw)
    args, problem = parse_arguments(raw)
    listed = next((t["function"] for t in tools if t["function"]["name"] == name), None)
    schema = None if listed is None else listed.get("parameters")
    if problem is not None or args is None or not needs_approval(name, schema, args):
        return await run.call_tool(client, call_id, name, raw)
    assert isinstance(run.user, ApprovingUser)  # run_loop checked it
    ask = question(name, listed.get("description") if listed else None, args)
    t = time.perf_counter()
    answer = await run.user.approve(run.transcript(), ask, index=run.approvals)
    run.timings["user"] += time.perf_counter() - t
    run.approvals += 1
    counts = run.metadata.setdefault("approval", {"asked": 0, "approved": 0, "refused": 0})
    counts["asked"] += 1
    counts["approved" if answer.approved else "refused"] += 1
    if answer.approved:
        return await run.call_tool(client, call_id, name, raw, approval=answer)
    return run.refuse_call(call_id, name, args, refusal(name, answer.reason), answer)


async def converse(run: Conversation, client: Client) -> None:
    t = time.perf_counter()
    listed = await list_all_tools(client)
    run.timings["list_tools"] = time.perf_counter() - t
    tools = apply_overrides([mcp_tool_to_openai(x) for x in listed], run.spec.scenario_tools)
    tools += copy.deepcopy(run.spec.builtin_tools)
    run.tools_offered = [x["function"]["name"] for x in tools]

    run.add_user(UserTurn(index=0, source="query", text=run.spec.query))
    while True:
        outcome = await agent_turn(run, client, tools)
        if outcome == "done" and await state_check(run):
            continue
        if outcome != "user":
            run.finish = outcome  # type: ignore[assignment]
            return
        finish = await run.user_reply()
        if finish is not None:
            run.finish = finish
            return


async def state_check(run: Conversation) -> bool:
    """state-check (bench.rollout.harness.state_check): once, when the agent ends, show it
    the effects of its calls so far and give it a bounded number of steps more."""
    if STATE_CHECK not in run.spec.harness or run.spec.effects_probe is None or run.state_checked:
        return False
    run.state_checked = True
    turn, record = await check_turn(run.spec.effects_probe, len(run.user_turns))
    run.add_user(turn)
    run.metadata["state_check"] = {**record, "agent_turn": run.agent_turns}
    run.turn_limit = min(run.turn_limit, run.agent_turns + EXTRA_TURNS)
    return True


async def run_loop(
    spec: LoopSpec,
    agent: AgentPolicy,
    user: UserPolicy,
    mcp_url: str,
    headers: Mapping[str, str] | None = None,
    *,
    ledger: UsageLedger | None = None,
) -> Trajectory:
    """Drive `agent` and `user` against the MCP endpoint until a finish reason (see the module doc)."""
    if APPROVAL in spec.harness and not isinstance(user, ApprovingUser):
        raise ValueError(f"harness {APPROVAL!r} needs a user that can approve ({type(user).__name__} cannot)")
    run = Conversation(spec, agent, user, ledger if ledger is not None else UsageLedger())
    if APPROVAL in spec.harness:
        run.metadata["approval"] = {"asked": 0, "approved": 0, "refused": 0}
    t0 = time.perf_counter()
    timeout = asyncio.timeout(spec.wall_clock)
    waited = ModelWait(timeout, limit=spec.wall_clock * spec.model_wait_factor)
    try:
        async with timeout:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    stack.enter_context(_waiting_on_models(waited))
                    t = time.perf_counter()
                    try:
                        client = await stack.enter_async_context(mcp_client(mcp_url, headers))
                    except Exception as exc:
                        raise McpEndpointError(
                            f"cannot open an MCP session on {mcp_url}: {single_exception(exc)!r}"
                        ) from exc
                    run.timings["connect"] = time.perf_counter() - t
                    await converse(run, client)
            except BaseExceptionGroup as group:
                raise single_exception(group) from group
    except TimeoutError as exc:
        if not timeout.expired():
            run.error = f"MCP endpoint timed out: {exc!r}"
            run.finish = run.finish or SYSTEM_ERROR
            _stop_clock(run, t0, waited)
            raise McpEndpointError(run.error, run.trajectory()) from exc
        run.finish = "timeout"
    except ContextLimitExceeded as exc:
        if exc.role != "agent":  # the user model cannot hold the benchmark's conversation
            run.error = f"system error: {exc}"
            run.finish = run.finish or SYSTEM_ERROR
            _stop_clock(run, t0, waited)
            failure = exc.endpoint_error()
            failure.trajectory = run.trajectory()
            raise failure from exc
        run.finish = "context_limit"
        run.error = str(exc)
    except (ModelEndpointError, McpEndpointError) as exc:
        run.error = f"system error: {exc}"
        run.finish = run.finish or SYSTEM_ERROR  # the conversation did not end: tbx's side failed
        _stop_clock(run, t0, waited)
        exc.trajectory = run.trajectory()
        raise
    except Exception as exc:
        if run.finish is None:
            raise
        # the conversation ended; only closing the MCP session failed
        run.metadata["mcp_close_error"] = repr(exc)
    _stop_clock(run, t0, waited)
    return run.trajectory()


@contextlib.contextmanager
def _waiting_on_models(waited: ModelWait) -> Iterator[None]:
    """Inside it, this task's (and its children's) model calls stop the attempt's clock."""
    token = MODEL_WAIT.set(waited)
    try:
        yield
    finally:
        MODEL_WAIT.reset(token)


def _stop_clock(run: Conversation, t0: float, waited: ModelWait) -> None:
    run.timings["total"] = time.perf_counter() - t0
    run.timings["model_wait"] = waited.seconds


# ---------------------------------------------------------------- entry point


async def run_attempt_agent(
    agent: str,
    task: Task,
    bench: Benchmark,
    mcp_url: str,
    headers: Mapping[str, str] | None = None,
    config: ModelsConfig | None = None,
    seed: int = 0,
    wall_clock: float = WALL_CLOCK,
    agent_script: AgentScript | None = None,
    **options: Any,
) -> Trajectory:
    """`run_agent` for `task` of a dataset loaded in this process: its brief built here
    (bench.rollout.brief.task_brief; `agent_script`: what `scripted` plays), then the
    same loop as from a shipped spec."""
    brief = task_brief(bench, task, agent, seed, agent_script)
    return await run_agent(brief, mcp_url, headers, config, seed, wall_clock, **options)


async def run_agent(
    brief: TaskBrief,
    mcp_url: str,
    headers: Mapping[str, str] | None = None,
    config: ModelsConfig | None = None,
    seed: int = 0,
    wall_clock: float = WALL_CLOCK,
    *,
    user: str | UserPolicy | None = None,
    clients: AgentClients | None = None,
    max_agent_turns: int | None = None,
    max_user_turns: int | None = None,
    call_timeout: float = TIMEOUTS.agent_call,
    harness: Sequence[str] = (),
    effects_probe: EffectsProbe | None = None,
) -> Trajectory:
    """Run one attempt's conversation for the task of `brief` against the MCP endpoint.

    The agent is the one the brief was built for (`brief.agent`): `oracle`, `noop`,
    `chaos` / `chaos:<rate>`, `scripted` (no model needed; oracle, chaos and scripted
    play the brief's script), or an LLM agent: `llm` (the `think` prompt), `llm:<prompt>` or a
    prompt name of the dataset (`think`); those need `config` with the `agent`
    role and, unless `user="scripted"`, the `user` role. `user`: None (built-in
    agents get the scripted user, LLM agents the simulated one), `"scripted"`,
    `"llm"`, or any `UserPolicy`. `clients` shares model clients between
    attempts; otherwise they are made from `config` and closed here.
    `harness`: the interventions on (bench.rollout.harness; default none);
    `effects_probe`: the attempt's effects so far, which `state-check` shows.
    """
    agent = brief.agent
    name = agent.partition(":")[0]
    ledger = UsageLedger()
    owned: list[LLMClient] = []
    metadata: dict[str, Any] = {}
    policy: AgentPolicy
    shared = clients or AgentClients()

    def client_for(role: str, given: LLMClient | None) -> LLMClient:
        if given is not None:
            return given
        if config is None:
            raise ModelsConfigError(f"agent {agent!r} needs a models config with the {role!r} role")
        made = LLMClient(config.role(role), role=role)
        owned.append(made)
        return made

    try:
        if name in (*REPLAYING_AGENTS, SCRIPTED_AGENT):
            if brief.script is None or brief.script.agent != name:
                raise ValueError(f"agent {agent!r} plays a script, but its brief has no {name} script")
            final = REPLAY_FINAL if brief.script.final is None else brief.script.final
            policy = PlanAgent(brief.script.calls, final=final)
            if name == "chaos":
                metadata["chaos"] = dict(brief.script.metadata)
        elif name == "noop":
            policy = noop_agent()
        else:
            policy = LLMAgent(
                client_for("agent", shared.agent),
                parallel_tool_calls=brief.parallel_tool_calls,
                attempt_seed=seed,
                ledger=ledger,
            )

        user_policy: UserPolicy
        if user is None:
            user = "scripted" if name in BUILTIN_AGENTS else "llm"
        if user == "scripted":
            user_policy = ScriptedUser()
        elif user == "llm":
            user_policy = LLMUser(
                client_for("user", shared.user), brief.user_context, attempt_seed=seed, ledger=ledger
            )
        elif isinstance(user, str):
            raise ValueError(f"unknown user {user!r}: use 'scripted', 'llm' or a UserPolicy")
        else:
            user_policy = user

        spec = LoopSpec.of(
            brief,
            max_agent_turns=max_agent_turns,
            max_user_turns=max_user_turns,
            wall_clock=wall_clock,
            model_wait_factor=config.model_wait_factor if config is not None else None,
            call_timeout=call_timeout,
            seed=seed,
            metadata=metadata,
            harness=parse_harness(harness),
            effects_probe=effects_probe,
        )
        try:
            traj = await run_loop(spec, policy, user_policy, mcp_url, headers, ledger=ledger)
        except Exception as exc:
            # a system error's partial trajectory is priced too: its tokens were spent
            partial = getattr(exc, "trajectory", None)
            if config is not None and isinstance(partial, Trajectory):
                partial.cost_usd = ledger.cost(config)
            raise
        if config is not None:
            traj.cost_usd = ledger.cost(config)
        return traj
    finally:
        for c in owned:
            await c.aclose()
