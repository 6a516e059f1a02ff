"""Approval requests: create one and look up their status."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import new_id
from servers.engine.helpers import drop_nulls
from servers.engine.tools import ToolContext, ToolInput, tool

TABLE = "approval_approval_requests"
RequestType = Literal[
    "software_access",
    "hardware_replacement",
    "client_access",
    "training_engagement_coordination",
    "training_cost",
    "expense_override",
    "travel",
    "document_access",
]


class CreateRequestInput(ToolInput):
    request_type: RequestType = Field(description="What the approval is for.")
    requester_email: str = Field(description="Email of the employee asking.")
    approver_email: str = Field(description="Email of the person who must approve.")
    amount: int | None = Field(default=None, description="Amount in US dollars, if any.")
    engagement_code: str | None = Field(default=None, description="Related engagement code, if any.")


class GetStatusInput(ToolInput):
    request_type: RequestType = Field(description="Kind of approval to look for.")
    requester_email: str = Field(description="Email of the employee who asked.")
    engagement_code: str | None = Field(default=None, description="Only requests for this engagement.")
    approver_email: str | None = Field(default=None, description="Only requests sent to this approver.")


@tool(
    "approval_create_request",
    CreateRequestInput,
    "Open a pending approval request and return its id.",
    catch_all="Failed to create approval request",
)
def create_request(ctx: ToolContext, args: CreateRequestInput) -> Any:
    approval_id = new_id(ctx, TABLE, "APR")
    ctx.db.insert(
        TABLE,
        {
            "id": approval_id,
            "request_type": args.request_type,
            "requester_email": args.requester_email,
            "approver_email": args.approver_email,
            "amount": args.amount,
            "engagement_code": args.engagement_code,
            "status": "pending",
        },
    )
    return {"approval_id": approval_id}


@tool(
    "approval_get_status",
    GetStatusInput,
    "List approval requests of a requester and type (optionally for one engagement or approver) with their status.",
    catch_all="Failed to retrieve approval status",
)
def get_status(ctx: ToolContext, args: GetStatusInput) -> Any:
    filters: dict[str, Any] = {"request_type": args.request_type, "requester_email": args.requester_email}
    if args.engagement_code is not None:
        filters["engagement_code"] = args.engagement_code
    if args.approver_email is not None:
        filters["approver_email"] = args.approver_email
    results = [
        drop_nulls(
            {
                "approval_id": r["id"],
                "status": r["status"],
                "request_type": r["request_type"],
                "approver_email": r["approver_email"],
                "engagement_code": r["engagement_code"],
            }
        )
        for r in ctx.db.find(TABLE, **filters)
    ]
    if not results:
        results = [
            drop_nulls(
                {
                    "approval_id": "NOT_FOUND",
                    "status": "not_found",
                    "request_type": args.request_type,
                    "approver_email": args.approver_email or "",
                    "engagement_code": args.engagement_code,
                }
            )
        ]
    return {"results": results}


TOOLS = (create_request, get_status)
