"""The run defaults `tbx run` and `tbx env serve` share, one home each: the CLI
flags (bench/cli/run.py, bench/cli/env.py), the run options
(bench.run.coordinator.RunOptions), the episode options (bench.env.host.EnvOptions),
the attempt spec and the agent loop read them from here.

Imports nothing heavy: the CLI reads it while it builds its parser (`tbx --help`)."""

from __future__ import annotations

from typing import Literal, get_args

WALL_CLOCK = 900.0  # seconds per attempt (an episode of `tbx env serve` too)
# Seconds per tool call: the session proxy's bound and the agent's client read timeout.
# sandbox cannot import bench: tests/unit/test_run_defaults.py holds sandbox's default equal.
CALL_TIMEOUT = 60.0
START_TIMEOUT = 120.0  # seconds for a sandbox to boot (`tbx env serve --start-timeout`)
DAEMON_WAIT = 120.0  # seconds a run holds new tries while the container daemon does not answer

# What the policy-search tool runs: vector + keyword hybrid (indexed with embeddings),
# or the keyword-only fallback (no vectors). The collection modes of servers.knowledge.
PolicySearch = Literal["hybrid", "keyword"]
POLICY_SEARCHES: tuple[PolicySearch, ...] = get_args(PolicySearch)
POLICY_SEARCH: PolicySearch = "hybrid"
