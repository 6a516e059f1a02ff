"""A session's attempt: the one attempt lifecycle (`bench.run.lifecycle.open_attempt`):
checkout, initial dump, proxy registration; on close the recorded calls, the gone
check, the terminal dump (only when the session ended without an error) and the
teardown. The session table holds its context open for the session's life."""

from __future__ import annotations

from bench.run.lifecycle import LiveAttempt, open_attempt

open_session_attempt = open_attempt


def containers_of(live: LiveAttempt) -> dict[str, str]:
    """role -> container id of the attempt's sandbox (for operators and tests)."""
    return dict(live.session.containers)


__all__ = ["LiveAttempt", "containers_of", "open_session_attempt"]
