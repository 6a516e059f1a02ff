"""Approval workflow: create approval requests and check their status."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from servers.domains.neobank.common import APPROVAL_REQUESTS, require_employee
from servers.engine.helpers import count_id, drop_nulls
from servers.engine.tools import ToolContext, ToolInput, tool


class ApprovalRequestType(StrEnum):
    access_request = "access_request"
    hardware_purchase = "hardware_purchase"
    data_export = "data_export"
    license_purchase = "license_purchase"
    exception_request = "exception_request"


class ApprovalUrgency(StrEnum):
    standard = "standard"
    urgent = "urgent"
    critical = "critical"


class CheckStatusInput(ToolInput):
    approval_request_id: str = Field(description="Identifier of the approval request, e.g. APR-00000001.")


class CreateRequestInput(ToolInput):
    request_type: ApprovalRequestType = Field(description="What is being approved.")
    requester_email: str = Field(description="Corporate email of the employee asking for approval.")
    approver_email: str = Field(description="Corporate email of the employee who must decide.")
    details: str = Field(description="What is requested and why.")
    urgency: ApprovalUrgency | None = Field(
        default=None, description="How urgent the decision is (standard if omitted)."
    )
    ticket_id: str | None = Field(default=None, description="Help-desk ticket the request belongs to.")


@tool(
    "approval_api_check_status",
    CheckStatusInput,
    "Show the status of an approval request, with the decision time and the approver's feedback once decided.",
)
def check_status(ctx: ToolContext, args: CheckStatusInput) -> dict[str, Any]:
    request = ctx.db.require_first(
        APPROVAL_REQUESTS,
        f"Approval request not found: {args.approval_request_id}",
        id=args.approval_request_id,
    )
    decided = request["decided_at"]
    return drop_nulls(
        {
            "status": request["status"],
            # The stored wall-clock fields, always labelled UTC (no offset conversion).
            "decided_at": decided.strftime("%Y-%m-%dT%H:%M:%SZ") if decided is not None else None,
            "approver_feedback": request["approver_feedback"],
        }
    )


@tool(
    "approval_api_create_request",
    CreateRequestInput,
    "Open a pending approval request from a requester to an approver, optionally linked to a ticket.",
)
def create_request(ctx: ToolContext, args: CreateRequestInput) -> dict[str, Any]:
    requester = require_employee(ctx, args.requester_email, "Requester not found")
    approver = require_employee(ctx, args.approver_email, "Approver not found")
    request_id = count_id(ctx.db, APPROVAL_REQUESTS, "APR-%08d")
    ctx.db.insert(
        APPROVAL_REQUESTS,
        {
            "id": request_id,
            "request_type": args.request_type.value,
            "requester_id": requester["id"],
            "approver_id": approver["id"],
            "status": "pending",
            "urgency": (args.urgency or ApprovalUrgency.standard).value,
            "details": args.details,
            "ticket_id": args.ticket_id,
            "created_at": None,
            "decided_at": None,
            "approver_feedback": None,
        },
    )
    return {"approval_request_id": request_id, "status": "pending"}


TOOLS = (check_status, create_request)
