"""What an episode's end tells the client, and what it is recorded with.

Episodes are written like `tbx run` attempts, through the same writers
(bench.run.recording): a row in results.jsonl, an AttemptRecord in attempts/,
the initial and terminal states in states/, the trajectory in trajectories/,
system errors in errors.jsonl (kept out of every score). `tbx report` and
`tbx judge regrade` read a server's output directory as they read a run's.

What goes back to the client is `verdict_metadata`: the signature and how many
differences of each kind, never a golden value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from judge import Verdict


def verdict_metadata(verdict: Verdict) -> dict[str, Any]:
    return {
        "signature": verdict.signature,
        "strict_match": verdict.strict,
        "differences": dict(Counter(d.kind for d in verdict.differences)),
        "rubrics_passed": verdict.rubrics_passed,
    }
