"""How long a sandbox's steps may take, one home each: every entry point (`tbx run`,
`tbx env serve`, the Session API, `tbx up`, `tbx proxy`) and every default below
them (a request's boot, a warm pool's boot, the tool proxy's per-call bound)
read `SANDBOX_TIMEOUTS` or a copy of it with the entry point's own flags applied.
bench.defaults adds the attempt's wall clock (`bench.defaults.TIMEOUTS`).

A `DockerProvider` is given one such object (`timeouts=`, default `SANDBOX_TIMEOUTS`)
and applies it to every boot it runs, cold or pooled, and to its pooled checkouts'
wait; a server's copy is `serving()` (the checkout's wait derived from the boot).

A cold and a warm boot wait alike: once they were 90 s and 60 s, and 120 s for
`tbx env serve`, so the same set could be given up on in one and not the other.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SANDBOX_TIMEOUTS", "SERVING_CHECKOUT_BOOTS", "SandboxTimeouts"]


class SandboxTimeouts(BaseModel):
    """Seconds each step of a sandbox may take."""

    model_config = ConfigDict(frozen=True)

    # A container set's start: time without CPU progress (sandbox.start_deadline), cold or
    # warm. Generous: a loaded 2-core machine has been seen to need 30 s for a cold start.
    boot: float = Field(default=120.0, gt=0)
    # One tool call at the tool proxy before it is answered as timed out.
    call: float = Field(default=60.0, gt=0)
    # How much longer than `call` an agent's MCP client waits for a reply: the proxy's own
    # timeout answers first (and is recorded); the client's only catches a lost reply.
    reply_grace: float = Field(default=15.0, ge=0)
    # A checkout's wait for a warm sandbox (None: as long as it takes).
    checkout: float | None = Field(default=None, gt=0)

    @property
    def agent_call(self) -> float:
        """An agent's wait for one tool call's reply: `call` + `reply_grace`."""
        return self.call + self.reply_grace

    def serving(self) -> Self:
        """These timeouts for a server's requests (`tbx env serve`'s resets): a checkout
        waits at most SERVING_CHECKOUT_BOOTS boots for its sandbox, then is refused as
        at capacity (sandbox.CheckoutTimeout) rather than held past the client's patience."""
        return self.model_copy(update={"checkout": SERVING_CHECKOUT_BOOTS * self.boot})


# A served request's checkout waits this many boots: the spare it would take may be
# booting (one boot), and another checkout's failed boot may come first (a second).
SERVING_CHECKOUT_BOOTS = 2


SANDBOX_TIMEOUTS = SandboxTimeouts()
