"""What a system error was caused by, for the run's summary and the report.

A system error's class says which part of the system failed, so an operator
knows where to look (the model endpoint, one of the attempt's containers, the
node: its Docker daemon, address pool, memory; the golden replay, the rubric
judge, or something else), and whether a new try in a fresh sandbox may get
past it: its `fault` (sandbox.faults). `fault_of` reads it; the few library
errors that reach a run carry none and are mapped here, by type, in one place.
Neither a message's words nor a class's name are read, so rewording or
renaming an error cannot recount it.

Where a system error is written down (results.jsonl's row, errors.jsonl's
line, an `AttemptFailure` coming back from a Ray node) its cause is written
with it. Rows written before they carried one are read by `legacy_cause`:
the table of class names and phrases tbx classified by until then, kept only
for those old records (their report and resume count as they did).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping

from sandbox import CAUSES, NODE_FAULT, OTHER_FAULT, Cause, Fault

__all__ = ["CAUSES", "causes_text", "count_causes", "fault_of", "legacy_cause"]


@functools.cache
def _library_faults() -> tuple[tuple[type[BaseException], Fault], ...]:
    """Errors of libraries (and of judge, which knows nothing of a run's causes), by type,
    most specific first. Everything else without a `fault` (psycopg, httpx, an OSError) is
    `other`: a failure of the attempt's sandbox is translated into SandboxGoneError, which
    names the dead container, before it gets here (sandbox.checkout)."""
    import docker.errors

    from judge import JudgeReplyError, JudgeUnavailable

    return (
        # The daemon answered: something it was asked about is missing (other, as always).
        (docker.errors.NotFound, OTHER_FAULT),
        (docker.errors.APIError, NODE_FAULT),  # the daemon refused or failed a request
        (JudgeUnavailable, Fault("judge")),
        (JudgeReplyError, Fault("judge")),
    )


def fault_of(exc: BaseException) -> Fault:
    """The fault of the system error `exc`: its own (`exc.fault`, its class's unless the
    instance says more), else its library type's, else `other` (retryable)."""
    own = getattr(exc, "fault", None)
    if isinstance(own, Fault):
        return own
    for kind, fault in _library_faults():
        if isinstance(exc, kind):
            return fault
    return OTHER_FAULT


def count_causes(causes: Iterable[Cause]) -> dict[str, int]:
    """Cause -> how many of `causes`, in CAUSES order (causes with none left out)."""
    counted = Counter(causes)
    return {c: counted[c] for c in CAUSES if counted[c]}


def causes_text(counts: Mapping[str, int]) -> str:
    """`model endpoint 1, container 2` (empty without errors)."""
    return ", ".join(f"{cause} {counts[cause]}" for cause in CAUSES if counts.get(cause))


# ---- reading old records only ----------------------------------------------------------
# Rows and lines written before a system error's cause was recorded with it say only
# "<exception class>: <text>". These are the classes and phrases tbx classified them by
# then; nothing new is classified this way (a new error class carries its `fault`).
_LEGACY_KINDS: dict[str, Cause] = {
    "ModelEndpointError": "model endpoint",
    "SandboxGoneError": "container",
    "SandboxLost": "container",
    "ContainerStartError": "container",
    "ContainerLostError": "container",
    "SeedError": "container",
    "DaemonUnreachable": "node",
    "DockerUnavailableError": "node",
    "NetworkPoolExhaustedError": "node",
    "ImageMissingError": "node",
    "NotEnoughMemory": "node",
    "APIError": "node",
    "GoldenReplayError": "golden replay",
    "GoldenNotCached": "golden replay",
    "JudgeUnavailable": "judge",
    "JudgeReplyError": "judge",
}
# A lost sandbox whose daemon could not be asked was the node's failure, not the container's.
_LEGACY_DAEMON_PHRASES = ("cannot ask the Docker daemon", "Docker daemon's event stream")


def legacy_cause(message: str) -> Cause:
    """The cause of a system error recorded as `message` by a tbx that did not record
    causes (an old run directory's row or errors.jsonl line); never for a new error."""
    kind = message.split(":", 1)[0].strip()
    cause = _LEGACY_KINDS.get(kind, "other")
    if cause == "container" and any(p in message for p in _LEGACY_DAEMON_PHRASES):
        return "node"
    return cause
