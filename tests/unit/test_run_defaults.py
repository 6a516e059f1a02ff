"""The run defaults of bench.defaults reach every reader: `tbx run`'s flags and
RunOptions, `tbx env serve`'s flags and EnvOptions; the timeouts are one object
(sandbox.timeouts, composed by bench.defaults.Timeouts) that every default below
reads; and the copies the lower layers must keep (servers cannot import bench)
still equal them."""

from __future__ import annotations

import inspect
from pathlib import Path

from bench import defaults
from bench.cli.main import build_parser
from bench.env.host import EnvOptions
from bench.rollout.agent_loop import run_agent
from bench.rollout.conversation import LoopSpec
from bench.run.coordinator import RunOptions
from bench.run.daemon import DaemonGate
from bench.session_api.server import TIMEOUTS as SESSION_API_TIMEOUTS
from sandbox import DEFAULT_CALL_TIMEOUT, SandboxPool, SandboxRequest
from sandbox.timeouts import SANDBOX_TIMEOUTS
from servers.toolsets import knowledge


def test_tbx_run_flags_and_options_default_to_the_shared_values() -> None:
    args = build_parser().parse_args(["run", "--out", "x"])
    opts = RunOptions(out=Path("x"))
    assert args.wall_clock == opts.wall_clock == defaults.WALL_CLOCK == 900.0
    assert args.daemon_wait == opts.daemon_wait == defaults.DAEMON_WAIT == 120.0
    assert args.policy_search == opts.policy_search == defaults.POLICY_SEARCH == "hybrid"


def test_tbx_env_serve_flags_and_options_default_to_the_shared_values() -> None:
    args = build_parser().parse_args(["env", "serve", "--dataset", "d", "--config", "c"])
    opts = EnvOptions(out=Path("x"))
    assert args.wall_clock == opts.wall_clock == defaults.WALL_CLOCK
    assert args.call_timeout == opts.call_timeout == defaults.CALL_TIMEOUT == 60.0
    assert args.start_timeout == opts.start_timeout == defaults.START_TIMEOUT == 120.0


def test_the_daemon_gate_waits_the_run_default() -> None:
    async def ping() -> None:
        return None

    assert DaemonGate(ping).wait == defaults.DAEMON_WAIT


def test_every_default_timeout_is_the_one_objects() -> None:
    # A cold boot (a request's), a warm one (a pool's) and env serve's flag wait alike.
    timeouts = defaults.TIMEOUTS
    assert timeouts.boot == SANDBOX_TIMEOUTS.boot == defaults.START_TIMEOUT == 120.0
    assert SandboxRequest(domains=["retail"]).start_timeout == timeouts.boot
    assert SandboxPool(["retail"]).start_timeout == timeouts.boot
    # The session proxy's per-call bound; an agent waits the grace beyond it.
    assert timeouts.call == DEFAULT_CALL_TIMEOUT == defaults.CALL_TIMEOUT == 60.0
    assert timeouts.agent_call == timeouts.call + timeouts.reply_grace == 75.0
    assert LoopSpec(task_id="t", agent="a", query="q").call_timeout == timeouts.agent_call
    assert inspect.signature(run_agent).parameters["call_timeout"].default == timeouts.agent_call
    assert timeouts.wall_clock == defaults.WALL_CLOCK
    # The Session API lifts the call bound only (its sessions carry their own timeout).
    assert SESSION_API_TIMEOUTS.model_dump() == {**SANDBOX_TIMEOUTS.model_dump(), "call": 3600.0}


def test_the_lower_layers_copies_equal_bench_defaults() -> None:
    # The search modes the policy server knows.
    assert defaults.POLICY_SEARCHES == knowledge.SEARCH_MODES
    assert defaults.POLICY_SEARCH == knowledge.DEFAULT_SEARCH
