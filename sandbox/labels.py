"""Labels on everything tbx creates, so the sweeper can always find it."""

from __future__ import annotations

import time
import uuid

RUN = "tbx.run"
ATTEMPT = "tbx.attempt"
CREATED = "tbx.created"
ROLE = "tbx.role"
OWNER_PID = "tbx.pid"
# Items older than this count as orphans even when their owner's pid is alive
# (a pid reused by an unrelated process, a hung run): what the sweeper removes by default.
ORPHAN_TTL = 6 * 3600.0


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def labels_for(run_id: str, attempt_id: str, role: str, pid: int) -> dict[str, str]:
    return {
        RUN: run_id,
        ATTEMPT: attempt_id,
        CREATED: str(int(time.time())),
        ROLE: role,
        OWNER_PID: str(pid),
    }
