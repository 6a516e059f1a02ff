"""Which part of the system a system error says failed, and whether a new try can
get past it: each error class says so itself, in a `fault` class attribute.

    class SeedError(SandboxError):
        fault = Fault("container")

    fault_of(exc)            # bench.run.causes: the error's `fault`, else by library type

A system error says nothing about the agent; its cause tells an operator where
to look (the run's `done:` line and `tbx report` count them by cause) and its
`retryable` whether `tbx run` tries the (task, repeat) again in a fresh sandbox.
The cause is never read from a message's words or a class's name, so rewording
or renaming an error cannot recount it. An instance may say more than its class
where one class covers two causes (a lost sandbox whose daemon could not be
asked is the node's failure, not a container's: `SandboxGoneError(..., fault=)`).

The causes are bench's vocabulary (its report's), listed here, below both
sandbox and bench, so sandbox's own errors can carry theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

__all__ = ["CAUSES", "CONTAINER_FAULT", "NODE_FAULT", "OTHER_FAULT", "Cause", "Fate", "Fault"]

# The model endpoint, one of the attempt's containers, the node (its Docker daemon,
# address pool, memory), the golden replay, the rubric judge, the task's own test
# function (an error, a limit or a bad reward of the test: a retry cannot cure it), or
# something else. "model endpoint incompatible": the endpoint deterministically refuses
# what tbx sends (a validation error), which no new try can get past.
Cause = Literal[
    "model endpoint",
    "model endpoint incompatible",
    "container",
    "node",
    "golden replay",
    "judge",
    "test function",
    "other",
]
CAUSES: tuple[Cause, ...] = get_args(Cause)


class Fault(BaseModel):
    """A system error's cause, and whether a new try in a fresh sandbox may get past it
    (False: it would only repeat, e.g. a golden replay that fails)."""

    model_config = ConfigDict(frozen=True)

    cause: Cause = "other"
    retryable: bool = True

    def __init__(self, cause: Cause = "other", retryable: bool = True) -> None:
        super().__init__(cause=cause, retryable=retryable)


CONTAINER_FAULT = Fault("container")
NODE_FAULT = Fault("node")
OTHER_FAULT = Fault("other")


@dataclass(frozen=True)
class Fate:
    """What became of one container of a set: `text` in words (as `describe`), and the
    facts a caller decides on."""

    role: str
    text: str
    own_memory_limit: bool = False  # OOM-killed by its own cgroup's memory limit
    ended_at: float | None = None  # when it ended (epoch seconds, the daemon's), if known
    # Ended from outside the set: SIGKILL or SIGTERM without its own memory limit hit
    # (`docker kill`/`stop`, the host's OOM killer) or removed. Not a crash of its own
    # (another exit code), not its own limit: those would end a new set the same way.
    outside: bool = False
    # The daemon could not be asked about it: its state is unknown (the node failed, as
    # far as anyone can tell, not the container).
    unknown: bool = False

    @property
    def fault(self) -> Fault:
        """The fault of a sandbox lost this way: the container's, or the node's when the
        daemon could not be asked (sandbox.faults)."""
        return NODE_FAULT if self.unknown else CONTAINER_FAULT
