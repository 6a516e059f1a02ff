"""Client access: VPN, client systems and the access prerequisites."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, new_id, opt, pick
from servers.engine.tools import ToolContext, ToolInput

VPN = "client_access_vpn_access"
SYSTEMS = "client_access_client_system_access"
REVOKED_AT = dt.datetime(2025, 10, 1, 0, 0, 0, tzinfo=dt.UTC)


class ClientAccessInput(ToolInput):
    action: Literal[
        "provision_vpn",
        "check_vpn_access",
        "revoke_vpn",
        "provision_client_system",
        "check_client_requirements",
        "get_employee_prerequisites",
    ] = Field(description="What to do.")
    email: str | None = opt("Employee email address (every action except check_client_requirements).")
    client_id: str | None = opt(
        "Client id (provision_client_system, check_client_requirements, get_employee_prerequisites; "
        "optional for provision_vpn and revoke_vpn)."
    )
    system_name: str | None = opt("Client system to open (provision_client_system).")
    access_type: Literal["full_access", "read_only", "contributor", "admin"] | None = opt(
        "Access level on the client system (provision_client_system)."
    )


def _active_vpn(ctx: ToolContext, email: str) -> list[dict[str, Any]]:
    return [r for r in ctx.db.find(VPN, employee_email=email) if r["revoked_at"] is None]


@action("email")
def provision_vpn(ctx: ToolContext, args: Any) -> Any:
    ctx.db.insert(
        VPN, {"id": new_id(ctx, VPN, "VPN"), "employee_email": args.email, "client_id": args.client_id}
    )
    return SUCCESS


@action("email")
def check_vpn_access(ctx: ToolContext, args: Any) -> Any:
    return {
        "vpn_access": [pick(r, ("id", "employee_email", "client_id")) for r in _active_vpn(ctx, args.email)]
    }


@action("email")
def revoke_vpn(ctx: ToolContext, args: Any) -> Any:
    rows = _active_vpn(ctx, args.email)
    if args.client_id is not None:
        rows = [r for r in rows if r["client_id"] == args.client_id][:1]
    for row in rows:
        ctx.db.update(VPN, row["id"], {"revoked_at": REVOKED_AT})
    return SUCCESS


@action("email", "client_id", "system_name", "access_type")
def provision_client_system(ctx: ToolContext, args: Any) -> Any:
    ctx.db.insert(
        SYSTEMS,
        {
            "id": new_id(ctx, SYSTEMS, "CSA"),
            "employee_email": args.email,
            "client_id": args.client_id,
            "system_name": args.system_name,
            "access_type": args.access_type,
        },
    )
    return SUCCESS


@action("client_id")
def check_client_requirements(ctx: ToolContext, args: Any) -> Any:
    client = ctx.db.require("salesforce_crm_clients", args.client_id, f"Client not found: {args.client_id}")
    return {
        "requirements": {
            "clearance_level": client["clearance_level"],
            "requires_nda": client["requires_nda"],
            "required_training_courses": list(client["required_training_courses"]),
        }
    }


@action("email", "client_id")
def get_employee_prerequisites(ctx: ToolContext, args: Any) -> Any:
    clearance = ctx.db.first("client_access_clearance_record", employee_email=args.email)
    nda = ctx.db.first("client_access_nda_record", employee_email=args.email, client_id=args.client_id)
    enrollments = ctx.db.find("degreed_training_enrollments", employee_email=args.email)
    return {
        "clearance_status": clearance["status"] if clearance else "not_initiated",
        "nda_status": nda["status"] if nda else "not_signed",
        "completed_training_courses": [
            r["course_id"] for r in enrollments if r["completion_date"] is not None
        ],
    }


TOOLS = (
    api_tool(
        "client_access_api",
        ClientAccessInput,
        "Access to client environments. provision_vpn / check_vpn_access / revoke_vpn: an employee's VPN "
        "access; provision_client_system: open a client system to an employee; check_client_requirements: "
        "clearance, NDA and training a client demands; get_employee_prerequisites: where an employee stands "
        "on those for one client.",
        "Client Access",
        {
            "provision_vpn": provision_vpn,
            "check_vpn_access": check_vpn_access,
            "revoke_vpn": revoke_vpn,
            "provision_client_system": provision_client_system,
            "check_client_requirements": check_client_requirements,
            "get_employee_prerequisites": get_employee_prerequisites,
        },
    ),
)
