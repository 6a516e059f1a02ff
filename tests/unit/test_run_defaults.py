"""The run defaults of bench.defaults reach every reader: `tbx run`'s flags and
RunOptions, `tbx env serve`'s flags and EnvOptions; and the copies the lower
layers must keep (sandbox cannot import bench) still equal them."""

from __future__ import annotations

from pathlib import Path

from bench import defaults
from bench.cli.main import build_parser
from bench.env.host import EnvOptions
from bench.run.coordinator import RunOptions
from bench.run.daemon import DaemonGate
from sandbox import DEFAULT_CALL_TIMEOUT
from servers import knowledge


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


def test_the_lower_layers_copies_equal_bench_defaults() -> None:
    # The session proxy's own per-call bound, and the search modes the policy server knows.
    assert DEFAULT_CALL_TIMEOUT == defaults.CALL_TIMEOUT
    assert defaults.POLICY_SEARCHES == knowledge.SEARCH_MODES
    assert defaults.POLICY_SEARCH == knowledge.DEFAULT_SEARCH
