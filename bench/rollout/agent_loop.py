"""One attempt's conversation: an agent, a (simulated) user and an MCP endpoint.

    traj = await run_attempt_agent("oracle", task, bench, mcp_url, headers)
    traj = await run_attempt_agent("think", task, bench, mcp_url, headers, config=models, seed=3)

The endpoint is any MCP (streamable HTTP) URL: the session proxy's (with its
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
- the attempt's wall clock runs out: `timeout`;
- the agent returns an empty completion: `agent_error`.

Every tool call goes through MCP and is recorded, reply included. Whatever
the model emits is the model's responsibility: argument text that is not a
JSON object (invalid JSON, NaN, too deep, too large, lone UTF-16 surrogates)
and tool names that cannot be sent get an error reply the model sees
(recorded with `via_mcp` False) and the attempt goes on; unknown tools are
answered by the endpoint. A model endpoint that stays down raises
`ModelEndpointError`, an MCP endpoint that fails raises `McpEndpointError`;
both carry the partial trajectory in `.trajectory` (system errors: never a
score).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bench.dataset import AgentPrompt, Benchmark, ScenarioTool, Task
from bench.llm.client import LLMClient, ModelEndpointError, UsageLedger
from bench.llm.config import ModelsConfig, ModelsConfigError
from bench.rollout.agents import BUILTIN_AGENTS, DONE_TAG, AgentPolicy, LLMAgent, ScriptedUser
from bench.rollout.agents.chaos import DEFAULT_RATE, chaos_agent
from bench.rollout.agents.noop import noop_agent
from bench.rollout.agents.oracle import oracle_agent
from bench.rollout.harness.hook import tool_message
from bench.rollout.harness.names import STATE_CHECK, parse_harness
from bench.rollout.harness.state_check import EXTRA_TURNS, EffectsProbe, check_turn
from bench.rollout.trajectory import FinishReason, Message, SystemPrompt, ToolCall, Trajectory, UserTurn
from bench.rollout.user_sim import LLMUser, UserPolicy
from sandbox import DEFAULT_MAX_REQUEST_BYTES, list_all_tools
from sandbox.proxy.relay import UNICODE_PROBLEM, sendable

DEFAULT_MAX_USER_TURNS = 10  # the reference harness's default
DEFAULT_MAX_AGENT_TURNS = 100  # the reference has none; the wall clock is the other bound
DEFAULT_WALL_CLOCK = 900.0
DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_AGENT_PROMPT = "think"
# the SDK's own defaults for MCP over HTTP: 30 s to connect / write, 300 s between reads
MCP_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# What one call's arguments may take: the proxy's request cap less room for the JSON-RPC envelope.
MAX_ARGUMENT_BYTES = DEFAULT_MAX_REQUEST_BYTES - 64 * 1024


def _default_prompt(bench: Benchmark) -> str:
    """The release's `think` prompt, or a dataset's only prompt (e.g. a demo pack's)."""
    if DEFAULT_AGENT_PROMPT in bench.agents or len(bench.agents) != 1:
        return DEFAULT_AGENT_PROMPT
    return next(iter(bench.agents))


class McpEndpointError(RuntimeError):
    """The MCP endpoint could not be reached or broke mid-conversation (a system error)."""

    def __init__(self, message: str, trajectory: Trajectory | None = None):
        super().__init__(message)
        self.trajectory = trajectory


# ---------------------------------------------------------------- tools


def mcp_tool_to_openai(tool: mcp_types.Tool | Mapping[str, Any]) -> dict[str, Any]:
    """An MCP tool (listing entry) as an OpenAI `tools` entry."""
    if isinstance(tool, mcp_types.Tool):
        name, description, schema = tool.name, tool.description, tool.input_schema
    else:
        name = tool["name"]
        description = tool.get("description")
        schema = tool.get("input_schema", tool.get("inputSchema"))
    params: dict[str, Any] = copy.deepcopy(dict(schema)) if schema else {}
    params.pop("$schema", None)
    params.setdefault("type", "object")
    if params["type"] == "object":
        params.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": name, "description": description or "", "parameters": params},
    }


def apply_overrides(
    tools: list[dict[str, Any]], scenario_tools: Sequence[ScenarioTool]
) -> list[dict[str, Any]]:
    """The scenario's client-side description overrides (a no-op when the proxy applied them)."""
    by_name = {t.name: t for t in scenario_tools}
    for tool in tools:
        fn = tool["function"]
        ov = by_name.get(fn["name"])
        if ov is None:
            continue
        if ov.override_description is not None:
            fn["description"] = ov.override_description
        props = fn["parameters"].get("properties", {})
        for arg, desc in (ov.override_arg_description or {}).items():
            if isinstance(props.get(arg), dict):
                props[arg]["description"] = desc
    return tools


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None) or (None, why the text is not a JSON object that can be sent).
    Empty text means {}. Whatever the model wrote lands here: every way it can be
    unusable is a reason for the model, never an exception."""
    if raw is None or not raw.strip():
        return {}, None
    size = len(raw.encode("utf-8", "replace"))
    if size > MAX_ARGUMENT_BYTES:
        return None, f"tool arguments are too large ({size} bytes; at most {MAX_ARGUMENT_BYTES})"
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return None, f"tool arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except RecursionError:
        return None, "tool arguments are not valid JSON (nested too deeply)"
    except ValueError as exc:  # NaN / Infinity, integers past Python's digit limit
        return None, f"tool arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"tool arguments must be a JSON object, got {type(value).__name__}"
    if not sendable(value):
        return None, UNICODE_PROBLEM
    return value, None


def is_done(text: str | None) -> bool:
    return text is not None and text.rstrip().endswith(DONE_TAG)


def strip_done(text: str) -> str:
    text = text.rstrip()
    return text[: -len(DONE_TAG)].rstrip() if text.endswith(DONE_TAG) else text


@contextlib.asynccontextmanager
async def mcp_client(url: str, headers: Mapping[str, str] | None = None) -> AsyncIterator[Client]:
    """An MCP client session on `url`, sending `headers` with every request."""
    if headers:
        async with (
            httpx2.AsyncClient(headers=dict(headers), timeout=MCP_HTTP_TIMEOUT) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client
    else:
        async with Client(url) as client:
            yield client


def _single(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (task groups wrap)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


# ---------------------------------------------------------------- the loop


@dataclass
class LoopSpec:
    task_id: str
    agent: str
    query: str
    system_prompts: list[tuple[str, str]] = field(default_factory=list)  # (source, text)
    builtin_tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI form, answered locally
    end_turn_tools: set[str] = field(default_factory=set)
    scenario_tools: Sequence[ScenarioTool] = ()
    max_agent_turns: int = DEFAULT_MAX_AGENT_TURNS
    max_user_turns: int = DEFAULT_MAX_USER_TURNS
    wall_clock: float = DEFAULT_WALL_CLOCK
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    seed: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    harness: tuple[str, ...] = ()  # interventions on (bench.rollout.harness); () = the plain loop
    effects_probe: EffectsProbe | None = None  # state-check: the attempt's effects so far (host side)


class _Run:
    def __init__(self, spec: LoopSpec, agent: AgentPolicy, user: UserPolicy, ledger: UsageLedger):
        self.spec = spec
        self.agent = agent
        self.user = user
        self.ledger = ledger
        self.system = [{"role": "system", "content": text} for _, text in spec.system_prompts if text]
        self.messages: list[Message] = []
        self.tool_calls: list[ToolCall] = []
        self.user_turns: list[UserTurn] = []
        self.tools_offered: list[str] = []
        self.metadata: dict[str, Any] = dict(spec.metadata)
        self.agent_turns = 0
        self.turn_limit = spec.max_agent_turns  # lowered by a state check (bounded extra turns)
        self.state_checked = False
        self.finish: FinishReason | None = None
        self.done_by: str | None = None
        self.error: str | None = None
        self.timings: dict[str, float] = {
            "connect": 0.0,
            "list_tools": 0.0,
            "agent": 0.0,
            "user": 0.0,
            "tools": 0.0,
        }

    # -- conversation pieces
    def transcript(self) -> list[tuple[str, str]]:
        out = []
        for m in self.messages:
            if m.role == "user" and m.content is not None:
                out.append(("user", m.content))
            elif m.role == "assistant" and m.content and m.content.strip():
                out.append(("assistant", m.content))
        return out

    def add_user(self, turn: UserTurn) -> None:
        self.user_turns.append(turn)
        self.messages.append(Message(role="user", content=turn.text))

    async def call_tool(self, client: Client, call_id: str, name: str, raw: str) -> ToolCall:
        args, problem = parse_arguments(raw)
        rec = ToolCall(
            index=len(self.tool_calls),
            call_id=call_id,
            tool=name,
            arguments=args,
            arguments_raw=raw if problem else None,
            agent_turn=self.agent_turns,
        )
        if problem is None and not sendable(name):
            # the proxy would answer the same for a name it does not list; this one cannot even be sent
            problem = f"Unknown tool: {json.dumps(name)}"
        if problem is not None:
            rec.via_mcp, rec.is_error, rec.result = False, True, f"Error: {problem}"
            self.tool_calls.append(rec)
            return rec
        # recorded before it is sent: a call cut short by the wall clock may still have run
        self.tool_calls.append(rec)
        t = time.perf_counter()
        try:
            res = await client.call_tool(name, args, read_timeout_seconds=self.spec.call_timeout)
        except MCPError as exc:  # a JSON-RPC error reply (unknown tool at the proxy, timeout, ...)
            rec.result, rec.is_error = f"Error: {exc}", True
        except BaseException as exc:
            rec.result, rec.is_error = "Error: no reply (the call was interrupted)", True
            rec.latency_ms = (time.perf_counter() - t) * 1000
            if isinstance(exc, Exception):
                raise McpEndpointError(f"MCP call {name} failed: {_single(exc)!r}") from exc
            raise
        else:
            rec.result = "".join(getattr(c, "text", "") for c in res.content)
            rec.is_error = bool(res.is_error)
        rec.latency_ms = (time.perf_counter() - t) * 1000
        self.timings["tools"] += rec.latency_ms / 1000
        rec.error_envelope = rec.result.startswith('{"error": ')
        return rec

    async def agent_turn(self, client: Client, tools: list[dict[str, Any]]) -> str:
        """Steps until the agent talks to the user: "user", or a finish reason."""
        while True:
            if self.agent_turns >= self.turn_limit:
                return "agent_limit"
            t = time.perf_counter()
            step = await self.agent.step(self.system + [m.to_openai() for m in self.messages], tools)
            self.timings["agent"] += time.perf_counter() - t
            self.agent_turns += 1
            if not step.tool_calls:
                text = step.content or ""
                if not text.strip():
                    self.error = "the agent returned an empty completion"
                    return "agent_error"
                self.messages.append(Message(role="assistant", content=text))
                if is_done(text):
                    self.done_by = "text"
                    return "done"
                return "user"
            ids = [tc.id or f"call_{self.agent_turns}_{i}" for i, tc in enumerate(step.tool_calls)]
            self.messages.append(
                Message(
                    role="assistant",
                    content=step.content,
                    tool_calls=[
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": tc.name, "arguments": tc.arguments},
                        }
                        for i, tc in zip(ids, step.tool_calls, strict=True)
                    ],
                )
            )
            enders = [tc.name for tc in step.tool_calls if tc.name in self.spec.end_turn_tools]
            for call_id, tc in zip(ids, step.tool_calls, strict=True):
                if enders:
                    # an end-turn tool stops the step before anything else in it runs
                    builtin = tc.name in self.spec.end_turn_tools
                    rec = ToolCall(
                        index=len(self.tool_calls),
                        call_id=call_id,
                        tool=tc.name,
                        arguments=parse_arguments(tc.arguments)[0],
                        arguments_raw=tc.arguments,
                        via_mcp=False,
                        builtin=builtin,
                        is_error=not builtin,
                        result="" if builtin else "Error: not executed, the agent ended the conversation",
                        agent_turn=self.agent_turns,
                    )
                    self.tool_calls.append(rec)
                else:
                    rec = await self.call_tool(client, call_id, tc.name, tc.arguments)
                content = tool_message(self.spec.harness, rec)
                self.messages.append(
                    Message(role="tool", tool_call_id=call_id, name=tc.name, content=content)
                )
            if enders:
                self.done_by = enders[0]
                return "done"

    async def converse(self, client: Client) -> None:
        t = time.perf_counter()
        listed = await list_all_tools(client)
        self.timings["list_tools"] = time.perf_counter() - t
        tools = apply_overrides([mcp_tool_to_openai(x) for x in listed], self.spec.scenario_tools)
        tools += copy.deepcopy(self.spec.builtin_tools)
        self.tools_offered = [x["function"]["name"] for x in tools]

        self.add_user(UserTurn(index=0, source="query", text=self.spec.query))
        index = 0
        while True:
            outcome = await self.agent_turn(client, tools)
            if outcome == "done" and await self.state_check():
                continue
            if outcome != "user":
                self.finish = outcome  # type: ignore[assignment]
                return
            index += 1
            if index > self.spec.max_user_turns:
                self.finish = "user_limit"
                return
            t = time.perf_counter()
            turn = await self.user.reply(self.transcript(), index=index)
            self.timings["user"] += time.perf_counter() - t
            self.add_user(turn)
            if turn.done:
                self.finish = "user_done"
                return

    async def state_check(self) -> bool:
        """state-check (bench.rollout.harness.state_check): once, when the agent ends, show it
        the effects of its calls so far and give it a bounded number of steps more."""
        if STATE_CHECK not in self.spec.harness or self.spec.effects_probe is None or self.state_checked:
            return False
        self.state_checked = True
        turn, record = await check_turn(self.spec.effects_probe, len(self.user_turns))
        self.add_user(turn)
        self.metadata["state_check"] = {**record, "agent_turn": self.agent_turns}
        self.turn_limit = min(self.turn_limit, self.agent_turns + EXTRA_TURNS)
        return True

    def trajectory(self) -> Trajectory:
        final = next(
            (
                m.content
                for m in reversed(self.messages)
                if m.role == "assistant" and m.content and m.content.strip()
            ),
            "",
        )
        usage = self.ledger.by_role()
        return Trajectory(
            task_id=self.spec.task_id,
            agent=self.spec.agent,
            seed=self.spec.seed,
            finish_reason=self.finish or "agent_error",
            done_by=self.done_by,
            messages=self.messages,
            tool_calls=self.tool_calls,
            user_turns=self.user_turns,
            final_message=strip_done(final),
            agent_turns=self.agent_turns,
            tools_offered=self.tools_offered,
            system_prompts=[SystemPrompt.of(src, text) for src, text in self.spec.system_prompts if text],
            usage=usage,
            timings={k: round(v, 6) for k, v in self.timings.items()},
            error=self.error,
            metadata=self.metadata,
        )


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
    run = _Run(spec, agent, user, ledger if ledger is not None else UsageLedger())
    t0 = time.perf_counter()
    timeout = asyncio.timeout(spec.wall_clock)
    try:
        async with timeout:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    t = time.perf_counter()
                    try:
                        client = await stack.enter_async_context(mcp_client(mcp_url, headers))
                    except Exception as exc:
                        raise McpEndpointError(
                            f"cannot open an MCP session on {mcp_url}: {_single(exc)!r}"
                        ) from exc
                    run.timings["connect"] = time.perf_counter() - t
                    await run.converse(client)
            except BaseExceptionGroup as group:
                raise _single(group) from group
    except TimeoutError as exc:
        if not timeout.expired():
            run.error = f"MCP endpoint timed out: {exc!r}"
            run.timings["total"] = time.perf_counter() - t0
            raise McpEndpointError(run.error, run.trajectory()) from exc
        run.finish = "timeout"
    except (ModelEndpointError, McpEndpointError) as exc:
        run.error = f"system error: {exc}"
        run.timings["total"] = time.perf_counter() - t0
        exc.trajectory = run.trajectory()
        raise
    except Exception as exc:
        if run.finish is None:
            raise
        # the conversation ended; only closing the MCP session failed
        run.metadata["mcp_close_error"] = repr(exc)
    run.timings["total"] = time.perf_counter() - t0
    return run.trajectory()


# ---------------------------------------------------------------- entry point


def _first(*values: int | None) -> int:
    return next(v for v in values if v is not None)


def bot_instructions(bench: Benchmark, task: Task) -> str | None:
    parts = [bench.scenario_of(task).bot_instructions, task.bot_instructions]
    kept = [p for p in parts if p is not None]
    return "\n".join(kept) if kept else None


def agent_prompt(bench: Benchmark, name: str) -> AgentPrompt:
    try:
        return bench.agents[name]
    except KeyError:
        known = ", ".join(sorted(bench.agents)) or "none"
        raise ValueError(
            f"unknown agent {name!r}: use one of {', '.join(BUILTIN_AGENTS)}, 'llm[:<prompt>]' "
            f"or an agent prompt of the dataset ({known})"
        ) from None


@dataclass
class AgentClients:
    """Model clients to share between attempts (one connection pool per role)."""

    agent: LLMClient | None = None
    user: LLMClient | None = None

    @staticmethod
    def from_config(config: ModelsConfig, *, user: bool = True) -> AgentClients:
        return AgentClients(
            agent=LLMClient(config.role("agent"), role="agent"),
            user=LLMClient(config.role("user"), role="user") if user else None,
        )

    async def aclose(self) -> None:
        for c in (self.agent, self.user):
            if c is not None:
                await c.aclose()


async def run_attempt_agent(
    agent: str,
    task: Task,
    bench: Benchmark,
    mcp_url: str,
    headers: Mapping[str, str] | None = None,
    config: ModelsConfig | None = None,
    seed: int = 0,
    wall_clock: float = DEFAULT_WALL_CLOCK,
    *,
    user: str | UserPolicy | None = None,
    clients: AgentClients | None = None,
    max_agent_turns: int | None = None,
    max_user_turns: int | None = None,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    harness: Sequence[str] = (),
    effects_probe: EffectsProbe | None = None,
) -> Trajectory:
    """Run one attempt's conversation for `task` against the MCP endpoint.

    `agent`: `oracle`, `noop`, `chaos` / `chaos:<rate>` (no model needed), or
    an LLM agent: `llm` (the `think` prompt), `llm:<prompt>` or a prompt name
    of the dataset (`think`); those need `config` with the `agent` role and,
    unless `user="scripted"`, the `user` role. `user`: None (built-in agents
    get the scripted user, LLM agents the simulated one), `"scripted"`,
    `"llm"`, or any `UserPolicy`. `clients` shares model clients between
    attempts; otherwise they are made from `config` and closed here.
    `harness`: the interventions on (bench.rollout.harness; default none);
    `effects_probe`: the attempt's effects so far, which `state-check` shows.
    """
    name, _, arg = agent.partition(":")
    ledger = UsageLedger()
    owned: list[LLMClient] = []
    metadata: dict[str, Any] = {}
    prompt: AgentPrompt | None = None
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
        if name in BUILTIN_AGENTS:
            if name == "oracle":
                policy = oracle_agent(bench, task)
            elif name == "noop":
                policy = noop_agent()
            else:
                try:
                    rate = float(arg) if arg else DEFAULT_RATE
                except ValueError:
                    raise ValueError(f"chaos rate must be a number, got {arg!r}") from None
                policy, plan = chaos_agent(bench, task, seed, rate)
                metadata["chaos"] = {
                    "rate": rate,
                    "perturbations": [p.model_dump() for p in plan.perturbations],
                }
        else:
            wanted = (arg or _default_prompt(bench)) if name == "llm" else name
            prompt = agent_prompt(bench, wanted)
            policy = LLMAgent(
                client_for("agent", shared.agent),
                parallel_tool_calls=prompt.parallel_tool_calls,
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
                client_for("user", shared.user), task.user_context, attempt_seed=seed, ledger=ledger
            )
        elif isinstance(user, str):
            raise ValueError(f"unknown user {user!r}: use 'scripted', 'llm' or a UserPolicy")
        else:
            user_policy = user

        systems: list[tuple[str, str]] = []
        builtin_tools: list[dict[str, Any]] = []
        end_turn: set[str] = set()
        if prompt is not None:
            systems.append((f"agent:{prompt.name}", prompt.system_instructions))
            for bt in prompt.builtin_tools:
                builtin_tools.append(mcp_tool_to_openai(bt))
                if bt.get("is_end_turn"):
                    end_turn.add(bt["name"])
        bot = bot_instructions(bench, task)
        if bot:
            systems.append(
                (f"scenario:{task.scenario}" if not task.bot_instructions else "bot_instructions", bot)
            )
        scenario = bench.scenario_of(task)
        end_turn |= {t.name for t in scenario.tools if t.is_end_turn}

        spec = LoopSpec(
            task_id=task.id,
            agent=agent,
            query=task.query,
            system_prompts=systems,
            builtin_tools=builtin_tools,
            end_turn_tools=end_turn,
            scenario_tools=scenario.tools,
            max_agent_turns=_first(max_agent_turns, task.max_agent_sim_turns, DEFAULT_MAX_AGENT_TURNS),
            max_user_turns=_first(max_user_turns, task.max_user_sim_turns, DEFAULT_MAX_USER_TURNS),
            wall_clock=wall_clock,
            call_timeout=call_timeout,
            seed=seed,
            metadata=metadata,
            harness=parse_harness(harness),
            effects_probe=effects_probe,
        )
        traj = await run_loop(spec, policy, user_policy, mcp_url, headers, ledger=ledger)
        if config is not None:
            traj.cost_usd = ledger.cost(config)
        return traj
    finally:
        for c in owned:
            await c.aclose()
