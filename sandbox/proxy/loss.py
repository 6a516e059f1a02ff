"""Whose doing the loss of a registered attempt's sandbox was: the agent's or the
infrastructure's.

A container of the set that hit its *own* cgroup memory limit (sandbox.oom: the
kernel's constraint, the cgroup's counters) while a call of the attempt was in
flight, or shortly after one was answered (its server may still be working on
a call the proxy answered as timed out), was driven there by the attempt's own
calls: nothing else runs in an attempt's containers. That loss is the agent's
outcome (`Loss.agent_load`): the attempt is scored as a failure with the
signature `resource_limit`, never retried as a system error. Every other loss
(a container killed or stopped from outside, the host out of memory, a daemon
restart, a network removed, an OOM kill with no call of the attempt near it) is
the infrastructure's: a system error (`SandboxGoneError`), retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.container_fate import Fate
from sandbox.faults import CONTAINER_FAULT, NODE_FAULT, Fault

__all__ = ["START_SLACK", "Loss", "agent_load", "limit_refusal"]

START_SLACK = 1.0  # seconds: a call that started this soon after the end still counts (clocks, rounding)


@dataclass(frozen=True)
class Loss:
    """Why an attempt's sandbox is lost (`cause`, in words) and whether the attempt's
    own calls caused it (`agent_load`: a limit of its own container hit by its load).
    `unknown`: the daemon could not be asked about the set (the node's failure)."""

    cause: str
    agent_load: bool = False
    unknown: bool = False

    @property
    def fault(self) -> Fault:
        """The system error's fault when the loss is the infrastructure's (sandbox.faults)."""
        return NODE_FAULT if self.unknown else CONTAINER_FAULT


def agent_load(
    fate: Fate | None, spans: Iterable[tuple[float, float | None]], tail: float, now: float
) -> bool:
    """Whether `fate` is a container's own memory limit hit while one of the attempt's
    calls `spans` ((start, end) in epoch seconds; end None: still in flight) was in
    flight at its end, or had been answered at most `tail` seconds before it."""
    if fate is None or not fate.own_memory_limit:
        return False
    at = fate.ended_at if fate.ended_at is not None else now
    for start, end in spans:
        if start > at + START_SLACK:
            continue
        if end is None or at <= end + tail:
            return True
    return False


def limit_refusal(name: str, loss: Loss) -> str:
    """The tool error an agent reads for every call after its own load brought its sandbox down."""
    return (
        f"Tool call '{name}' refused: this attempt's own tool calls drove its sandbox over a "
        f"resource limit ({loss.cause}); no further tool call can be served in this attempt."
    )
