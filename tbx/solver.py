"""The conversation ThinkingBox-Bench defines, in Inspect: tbx's own loop
(bench.rollout.agent_loop.run_loop and bench.rollout.conversation's turn rules: the
task's agent and user turn limits, `<DONE>` and end-turn tools, the user's stop token,
the wall clock) with the evaluated model as the agent and the `user` role (default: the
evaluated model) as the simulated customer, who alone holds the task's private context.
The agent's system messages are the brief's (the agent definition's prompt, the
scenario's and the task's instructions); its tools are those the attempt's tool-proxy
MCP endpoint lists (the task's allow-list), the scenario's description overrides applied.

When the conversation is over the attempt ends (terminal state, teardown) and the
sample's messages and output are the conversation's, for `inspect view`.
"""

from __future__ import annotations

import contextlib

from inspect_ai.model import ModelOutput, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import LimitExceededError, sandbox

from bench.defaults import TIMEOUTS
from bench.rollout.agent_loop import run_loop
from bench.rollout.brief import task_brief
from bench.rollout.conversation import LoopSpec
from sandbox.proxy.models import ResourceLimitHit
from tbx.host import AGENT_NAME
from tbx.roles import InspectAgent, InspectUser, to_inspect
from tbx.sandboxenv import TbxSandbox

# The brief's agent: tbx's LLM agent under the dataset's default prompt.
BRIEF_AGENT = "llm"


@solver
def tbx_conversation() -> Solver:
    """The benchmark's conversation on the sample's tbx attempt (see the module doc)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        attempt = sandbox().as_type(TbxSandbox).attempt
        host, task = attempt.host, attempt.task
        brief = task_brief(host.bench, task, BRIEF_AGENT)
        spec = LoopSpec.of(
            brief,
            agent=AGENT_NAME,
            wall_clock=host.config.wall_clock,
            # the proxy's own bound answers first (and is recorded); this one catches a lost reply
            call_timeout=host.config.call_timeout + TIMEOUTS.reply_grace,
            seed=attempt.outcome.repeat,
        )
        url, headers = attempt.endpoint
        user = InspectUser(get_model(role="user"), brief.user_context)
        try:
            trajectory = await run_loop(spec, InspectAgent(get_model()), user, url, headers)
        except LimitExceededError:
            # Inspect's own limit (messages, tokens, time) ended the agent's turn: the state it
            # left is its outcome, which the scorer grades as Inspect's limits are graded.
            with contextlib.suppress(ResourceLimitHit):
                await attempt.end()
            raise
        except Exception as exc:
            # No terminal state: the conversation did not end. The lifecycle's word on how the
            # attempt ended (a lost container, when one was) is what is raised. A cancellation
            # is left to sample_cleanup, which Inspect runs shielded.
            await attempt.end(exc)
            raise
        attempt.trajectory = trajectory
        attempt.outcome.trajectory = trajectory
        system = [{"role": "system", "content": text} for _, text in spec.system_prompts if text]
        state.messages = to_inspect(system + [m.to_openai() for m in trajectory.messages])
        state.output = ModelOutput.from_content(model=str(get_model()), content=trajectory.final_message)
        with contextlib.suppress(ResourceLimitHit):  # the attempt's own limit: the scorer grades it
            await attempt.end()
        return state

    return solve
