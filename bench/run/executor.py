"""Where a run's attempts execute: the seam between the coordinator and the machines.

The coordinator hands an `AttemptSpec` to an `AttemptExecutor` and gets an
`AttemptOutcome` back; it never touches a sandbox itself. An executor says
only *where* attempts run (`start`, `open`, `execute`, `close`); what the run
needs to know of the sandboxes there (images, digests, the plan, the daemon's
health, how many are alive and warm) it offers as `sandboxes`, a `Sandboxes`
view: on one machine that is the `sandbox.SandboxProvider` itself (it has
exactly these members), on a cluster a summary of every node's provider
(`bench.run.ray_executor.ClusterSandboxes`). So local, Ray and any future
placement plug in at one place, and the provider stays the one lifecycle of a
sandbox. Grading stays with the coordinator either way, so nothing golden
crosses this seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from bench.run.attempt import AttemptOutcome, AttemptSpec
from bench.run.lifecycle import execute_attempt

if TYPE_CHECKING:
    from bench.llm.config import ModelsConfig
    from bench.rollout.clients import AgentClients
    from sandbox import ProxyServer, SandboxProvider, Upcoming

__all__ = ["AttemptExecutor", "LocalExecutor", "Sandboxes"]


class Sandboxes(Protocol):
    """What the coordinator reads of the sandboxes wherever attempts run
    (`sandbox.SandboxProvider` has these members)."""

    @property
    def images(self) -> dict[str, str]:
        """Image role -> tag the attempts run on (recorded in the manifest)."""

    async def image_digests(self) -> dict[str, str]:
        """Image role -> content digest (recorded in the manifest)."""

    def plan(self, budget: dict[str, int], upcoming: Sequence[Upcoming] | None = None) -> None:
        """Attempts still to run per domain (warm pools size themselves from it) and,
        in the order they will start, what each will be prepared with (a warm pool
        prepares its spares ahead for them; a placement may ignore it)."""

    async def ping(self) -> None:
        """Raise when the container daemon does not answer (the coordinator then waits)."""

    async def recovered(self) -> None:
        """The daemon answers again after an outage: drop what did not survive it."""

    @property
    def alive(self) -> int:
        """Sandboxes alive now (progress view)."""

    @property
    def warm(self) -> int:
        """Warm sandboxes waiting (progress view)."""


class AttemptExecutor(Protocol):
    """Where a run's attempts execute."""

    sandboxes: Sandboxes

    async def start(self, run_id: str) -> None:
        """Sweep leftovers and resolve images (before the manifest is written)."""

    async def open(self) -> None:
        """Ready to execute (proxy up, model clients made)."""

    async def execute(self, spec: AttemptSpec) -> AttemptOutcome:
        """One attempt; a system error comes back in the outcome, never raised."""

    async def close(self, run_id: str) -> None:
        """Stop everything the run started and sweep what is left of it."""


class LocalExecutor:
    """Attempts on this machine: `provider`'s sandboxes behind an in-process proxy."""

    def __init__(self, provider: SandboxProvider, config: ModelsConfig | None = None):
        # No dataset: every spec carries what its attempt needs (the same here and on a node).
        self.provider = provider
        self.sandboxes: Sandboxes = provider
        self.config = config
        self.proxy: ProxyServer | None = None
        self.clients: AgentClients | None = None

    async def start(self, run_id: str) -> None:
        await self.provider.start(run_id)

    async def open(self) -> None:
        from bench.rollout.clients import AgentClients
        from sandbox import ProxyServer

        if self.config is not None and self.config.agent is not None:
            self.clients = AgentClients.from_config(self.config, user=self.config.user is not None)
        self.proxy = ProxyServer().start()

    async def execute(self, spec: AttemptSpec) -> AttemptOutcome:
        assert self.proxy is not None, "open() starts the proxy"
        return await execute_attempt(spec, self.provider, self.proxy, clients=self.clients)

    async def close(self, run_id: str) -> None:
        # Each step even when the one before failed (the daemon away: the provider's
        # removals raise, yet the proxy's thread and the model clients must go).
        try:
            await self.provider.close()
        finally:
            try:
                proxy, self.proxy = self.proxy, None
                if proxy is not None:
                    proxy.close()
                clients, self.clients = self.clients, None
                if clients is not None:
                    await clients.aclose()
            finally:
                await self.provider.sweep(run_id)
