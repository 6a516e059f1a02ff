"""The run defaults of bench.defaults reach every reader: `tbx run`'s flags and
RunOptions, `tbx env serve`'s flags and EnvOptions; the timeouts are one object
(sandbox.timeouts, composed by bench.defaults.Timeouts) that every default below
reads; and the copies the lower layers must keep (servers cannot import bench)
still equal them."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from bench import defaults
from bench.cli.main import build_parser
from bench.env.host import EnvOptions
from bench.rollout.agent_loop import run_agent
from bench.rollout.conversation import LoopSpec
from bench.run.coordinator import RunOptions
from bench.run.daemon import DaemonGate
from bench.session_api.server import TIMEOUTS as SESSION_API_TIMEOUTS
from sandbox import DEFAULT_CALL_TIMEOUT, SANDBOX_TIMEOUTS, DockerProvider, SandboxPool, SandboxRequest
from sandbox import provider as provider_module
from sandbox.timeouts import SERVING_CHECKOUT_BOOTS
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
    # The tool proxy's per-call bound; an agent waits the grace beyond it.
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


def test_one_timeouts_object_reaches_every_boot_and_checkout_of_a_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every entry point's provider takes the one object (or its copy with flags applied).
    assert DockerProvider().timeouts is SANDBOX_TIMEOUTS and SANDBOX_TIMEOUTS.checkout is None
    served = EnvOptions(out=Path("x")).timeouts
    assert (served.boot, served.call, served.wall_clock) == (120.0, 60.0, defaults.WALL_CLOCK)
    assert served.checkout == SERVING_CHECKOUT_BOOTS * served.boot == 240.0  # a reset waits two boots
    flags = EnvOptions(out=Path("x"), start_timeout=600, call_timeout=30).timeouts
    assert (flags.boot, flags.call, flags.checkout) == (600, 30, 1200)
    assert isinstance(flags, defaults.Timeouts)
    # A provider applies its boot to cold boots and to its pools' boots alike.
    seen: dict[str, float] = {}

    class Recorded:
        def __init__(self, request: SandboxRequest, *args: Any, **kw: Any) -> None:
            seen["cold"] = request.start_timeout

        def boot(self) -> None:
            pass

    class Pool:
        def __init__(self, domains: list[str], **kw: Any) -> None:
            seen["pool"] = kw["start_timeout"]

        async def __aenter__(self) -> Pool:
            return self

    monkeypatch.setattr(provider_module, "Sandbox", Recorded)
    monkeypatch.setattr(provider_module, "SandboxPool", Pool)
    provider = DockerProvider(warm=1, timeouts=flags)
    provider.images = {}
    asyncio.run(provider.boot(SandboxRequest(domains=["retail"])))
    asyncio.run(provider.warm_up(SandboxRequest(domains=["retail"])))
    assert seen == {"cold": 600, "pool": 600}
