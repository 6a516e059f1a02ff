"""Labels on everything tbx creates, so the sweeper can always find it."""

from __future__ import annotations

import os
import time
import uuid

RUN = "tbx.run"
ATTEMPT = "tbx.attempt"
CREATED = "tbx.created"
ROLE = "tbx.role"
OWNER_PID = "tbx.pid"
# The cluster node that started the item (`tbx run --ray`): a node's leftovers are
# found by it when the node comes back. Set by the node's process in NODE_ENV.
NODE = "tbx.node"
NODE_ENV = "TBX_NODE"
# Items older than this count as orphans even when their owner's pid is alive
# (a pid reused by an unrelated process, a hung run): what the sweeper removes by default.
ORPHAN_TTL = 6 * 3600.0


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def labels_for(run_id: str, attempt_id: str, role: str, pid: int) -> dict[str, str]:
    out = {
        RUN: run_id,
        ATTEMPT: attempt_id,
        CREATED: str(int(time.time())),
        ROLE: role,
        OWNER_PID: str(pid),
    }
    node = os.environ.get(NODE_ENV)
    if node:
        out[NODE] = node
    return out
