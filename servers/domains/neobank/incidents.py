"""Security incidents (read-only)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from servers.domains.neobank.common import INCIDENT_NOW, SECURITY_INCIDENTS
from servers.engine.helpers import drop_nulls, out_dt
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

RECENTLY_CLOSED_WINDOW = dt.timedelta(hours=24)


class SecurityVerifyIncidentInput(ToolInput):
    pass


@tool(
    "security_api_verify_incident",
    SecurityVerifyIncidentInput,
    "List the security incidents that are currently active or were closed within the last 24 hours, newest first.",
)
def verify_incident(ctx: ToolContext, args: SecurityVerifyIncidentInput) -> dict[str, Any]:
    since = INCIDENT_NOW - RECENTLY_CLOSED_WINDOW
    incidents = []
    try:
        for row in ctx.db.all(SECURITY_INCIDENTS):
            resolved = row["resolved_at"]
            if not (row["is_active"] or (resolved is not None and resolved >= since)):
                continue
            incidents.append(
                drop_nulls(
                    {
                        "incident_id": row["id"],
                        "severity": row["severity"],
                        "description": row["description"],
                        "started_at": row["reported_at"].isoformat(),
                        "is_active": row["is_active"],
                        "closed_at": out_dt(resolved),
                    }
                )
            )
    except TypeError as exc:  # a naive resolution time cannot be compared with the aware window
        raise ToolError(f"Failed to retrieve security incidents: {exc}") from exc
    incidents.sort(key=lambda i: i["started_at"], reverse=True)
    return {"incidents": incidents}


TOOLS = (verify_incident,)
