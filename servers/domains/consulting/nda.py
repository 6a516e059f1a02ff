"""Client NDAs, kept in the client-access NDA records."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, opt
from servers.engine.tools import ToolContext, ToolInput

TABLE = "client_access_nda_record"


class NdaInput(ToolInput):
    action: Literal["check_status", "send_for_signature"] = Field(description="What to do.")
    email: str | None = opt("Employee email address (both actions).")
    client_id: str | None = opt("Client id (both actions).")


@action("email", "client_id")
def check_status(ctx: ToolContext, args: Any) -> Any:
    row = ctx.db.first(TABLE, employee_email=args.email, client_id=args.client_id)
    status = row["status"] if row else "not_signed"
    return {"signed": status == "signed", "nda_data": {"status": status}}


@action("email", "client_id")
def send_for_signature(ctx: ToolContext, args: Any) -> Any:
    ctx.db.upsert(
        TABLE, {"employee_email": args.email, "client_id": args.client_id, "status": "sent_for_signature"}
    )
    return SUCCESS


TOOLS = (
    api_tool(
        "nda_api",
        NdaInput,
        "Client non-disclosure agreements. check_status: whether an employee signed a client's NDA; "
        "send_for_signature: send that NDA to the employee to sign.",
        "NDA",
        {"check_status": check_status, "send_for_signature": send_for_signature},
    ),
)
