"""What a system error was caused by, for the run's summary and the report.

Every system error is recorded as "<exception class>: <text>" (bench.run.
recording.error_message, bench.run.attempt.AttemptFailure); the class, and
for a lost sandbox whether the daemon could be asked, say which part of the
system failed, so an operator knows where to look: the model endpoint, one
of the attempt's containers, the node (its Docker daemon, address pool,
memory), the golden replay, the rubric judge, or something else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["CAUSES", "cause_of", "causes_text", "count_causes"]

MODEL, CONTAINER, NODE, GOLDEN, JUDGE, OTHER = (
    "model endpoint",
    "container",
    "node",
    "golden replay",
    "judge",
    "other",
)
CAUSES = (MODEL, CONTAINER, NODE, GOLDEN, JUDGE, OTHER)

_BY_KIND = {
    "ModelEndpointError": MODEL,
    "SandboxGoneError": CONTAINER,
    "SandboxLost": CONTAINER,  # bench.env.episode's name for it
    "ContainerStartError": CONTAINER,
    "ContainerLostError": CONTAINER,
    "SeedError": CONTAINER,
    "DaemonUnreachable": NODE,
    "DockerUnavailableError": NODE,
    "NetworkPoolExhaustedError": NODE,
    "ImageMissingError": NODE,
    "NotEnoughMemory": NODE,
    "APIError": NODE,
    "GoldenReplayError": GOLDEN,
    "GoldenNotCached": GOLDEN,
    "JudgeUnavailable": JUDGE,
    "JudgeReplyError": JUDGE,
}
# A lost sandbox whose daemon could not be asked: the node failed, not the container.
_DAEMON = "cannot ask the Docker daemon"


def cause_of(message: str) -> str:
    """The cause of the system error recorded as `message` (one of CAUSES)."""
    kind = message.split(":", 1)[0].strip()
    cause = _BY_KIND.get(kind, OTHER)
    if cause == CONTAINER and (_DAEMON in message or "Docker daemon's event stream" in message):
        return NODE
    return cause


def count_causes(messages: Iterable[str]) -> dict[str, int]:
    """Cause -> how many of `messages`, in CAUSES order (causes with none left out)."""
    counted = Counter(cause_of(m) for m in messages)
    return {c: counted[c] for c in CAUSES if counted[c]}


def causes_text(counts: Mapping[str, int]) -> str:
    """`model endpoint 1, container 2` (empty without errors)."""
    return ", ".join(f"{cause} {counts[cause]}" for cause in CAUSES if counts.get(cause))
