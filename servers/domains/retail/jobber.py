"""Installation field-service jobs."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from servers.domains.retail.common import JOBS, drop_nulls, first_by_either
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolInput, tool


def _job(ctx: ToolContext, job_id: str) -> dict[str, Any]:
    job = ctx.db.require_first(JOBS, f"Installation job not found: {job_id}", id=job_id)
    return job


class CancelInstallationInput(ToolInput):
    job_id: str = Field(description="Installation job to cancel, e.g. JOB-10000001.")
    order_id: str = Field(description="Order the installation belongs to.")
    cancellation_reason: Literal[
        "customer_wants_ship_only", "customer_cancelled_order", "product_incompatible", "address_inaccessible"
    ] = Field(description="Why the installation is cancelled.")


@tool(
    "cancel_installation",
    CancelInstallationInput,
    "Cancel a scheduled installation job and report the service fee to be returned.",
    catch_all="Failed to cancel installation",
)
def cancel_installation(ctx: ToolContext, args: CancelInstallationInput) -> dict[str, Any]:
    job = _job(ctx, args.job_id)
    ctx.db.update(JOBS, job["id"], {"status": "cancelled"})
    return {"job_id": job["id"], "status": "cancelled", "service_cost_refunded": job["service_cost"]}


class GetInstallationJobInput(ToolInput):
    job_id: str | None = Field(default=None, description="Installation job id (takes precedence).")
    order_id: str | None = Field(default=None, description="Order id, used when no job id is given.")


@tool(
    "get_installation_job",
    GetInstallationJobInput,
    "Look up an installation job by its id or by its order: service type, schedule, technician, "
    "status, completion date and fee.",
    catch_all="Failed to retrieve installation job",
)
def get_installation_job(ctx: ToolContext, args: GetInstallationJobInput) -> dict[str, Any]:
    job = first_by_either(
        ctx,
        JOBS,
        ("job_id", "id", args.job_id),
        ("order_id", "order_id", args.order_id),
        "Installation job not found",
    )
    return drop_nulls(
        {
            "job_id": job["id"],
            "order_id": job["order_id"],
            "customer_id": job["customer_id"],
            "service_type": job["service_type"],
            "scheduled_date": out_dt(job["scheduled_date"]),
            "technician_id": job["technician_id"],
            "status": job["status"],
            "completion_date": out_dt(job["completion_date"]),
            "service_cost": job["service_cost"],
        }
    )


class RescheduleInstallationInput(ToolInput):
    job_id: str = Field(description="Installation job to move.")
    new_scheduled_date: dt.datetime = Field(description="New appointment date and time (ISO 8601).")
    reschedule_reason: Literal[
        "customer_request", "workmanship_issue", "technician_unavailable", "weather_delay"
    ] = Field(description="Why the job is moved. A workmanship issue reopens a completed job.")


@tool(
    "reschedule_installation",
    RescheduleInstallationInput,
    "Move an installation job to a new date. A completed job rescheduled for a workmanship issue "
    "is reopened as scheduled.",
    catch_all="Failed to reschedule installation",
)
def reschedule_installation(ctx: ToolContext, args: RescheduleInstallationInput) -> dict[str, Any]:
    job = _job(ctx, args.job_id)
    changes: dict[str, Any] = {"scheduled_date": args.new_scheduled_date}
    if args.reschedule_reason == "workmanship_issue" and job["status"] == "completed":
        changes["status"] = "scheduled"
    updated = ctx.db.update(JOBS, job["id"], changes)
    return {
        "job_id": job["id"],
        "old_scheduled_date": out_dt(job["scheduled_date"]),
        "new_scheduled_date": out_dt(args.new_scheduled_date),
        "status": updated["status"],
    }


TOOLS = (cancel_installation, get_installation_job, reschedule_installation)
