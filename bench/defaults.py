"""The run defaults `tbx run` and `tbx env serve` share, one home each: the CLI
flags (bench/cli/run.py, bench/cli/env.py), the run options
(bench.run.coordinator.RunOptions), the episode options (bench.env.host.EnvOptions),
the attempt spec and the agent loop read them from here; and the servers' own
(`tbx session-proxy`: bench/cli/session_proxy.py, bench.session_api.server.ServeOptions).

Imports nothing heavy: the CLI reads it while it builds its parser (`tbx --help`)."""

from __future__ import annotations

from pydantic import Field

from sandbox import SandboxTimeouts
from servers.toolsets.knowledge.collection import DEFAULT_SEARCH, SEARCH_MODES, SearchMode


class Timeouts(SandboxTimeouts):
    """Every timeout of an attempt: its sandbox's (boot, call, checkout: sandbox.timeouts,
    their one home) and its wall clock."""

    wall_clock: float = Field(default=900.0, gt=0)  # seconds per attempt (an env serve episode too)
    # The wall clock stops while tbx waits on a model endpoint; that wait has its own bound,
    # this many wall clocks per attempt (bench.llm.client.ModelWait): past it, the attempt is a
    # system error of cause `model endpoint` (the endpoint's slowness, not the agent's).
    model_wait_factor: float = Field(default=4.0, gt=0)

    @property
    def max_model_wait(self) -> float:
        return self.wall_clock * self.model_wait_factor


TIMEOUTS = Timeouts()
WALL_CLOCK = TIMEOUTS.wall_clock
MODEL_WAIT_FACTOR = TIMEOUTS.model_wait_factor  # model wait allowed per attempt, in wall clocks
CALL_TIMEOUT = TIMEOUTS.call  # the tool proxy's bound per tool call (`--call-timeout`)
START_TIMEOUT = TIMEOUTS.boot  # a sandbox's boot, cold or warm (`tbx env serve --start-timeout`)
DAEMON_WAIT = 120.0  # seconds a run holds new tries while the container daemon does not answer
# Tries of a (task, repeat) again after a system error (bench.run.retries): those that reached
# the agent's turns (`--max-retries`), those lost before them (`--max-setup-retries`).
MAX_RETRIES = 2
MAX_SETUP_RETRIES = 5
# Sessions `tbx session-proxy` holds at once, live or being created (`--max-sessions`),
# whatever memory admits: a bound on containers, networks and connections. Above the
# RL trainer's batch (18 prompts x 8 rollouts = 144 creates at once).
MAX_SESSIONS = 256
# The largest request body it reads (`--max-body`): the largest v1 session_create is
# 70 KB; a custom dataset's data_patch may be far larger. A body is parsed on the event
# loop, ~30 ms a MiB of small objects, so the limit also bounds what one body delays.
MAX_BODY_MIB = 4
# Seconds a capacity refusal asks its client to wait (a Retry-After, OpenEnv's
# `retry_after`): sessions and episodes end after their conversations, a set boots in
# seconds. The Session API's admission, and a reset or create whose sandbox checkout
# gave up waiting (sandbox.CheckoutTimeout), in `tbx env serve` and the Session API.
RETRY_AFTER = 10

# What the policy-search tool runs: vector + keyword hybrid (indexed with embeddings),
# or the keyword-only fallback (no vectors): the knowledge toolset's search modes.
PolicySearch = SearchMode
POLICY_SEARCHES = SEARCH_MODES
POLICY_SEARCH = DEFAULT_SEARCH
