"""Workday HR look-ups (read-only)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.engine.tools import ToolContext, ToolError, tool
from servers.neobank.common import EMPLOYEES, LenientInput, employee_by_email, employee_by_id, without_nulls

# A manager chain longer than the table can only come from a cycle.
_CHAIN_GUARD = 10_000


class WorkdayGetEmployeeInput(LenientInput):
    email: str = Field(description="Corporate email address of the employee.")


class WorkdayGetManagerChainInput(LenientInput):
    email: str = Field(description="Corporate email address of the employee whose managers are wanted.")


class WorkdayGetOrgStructureInput(LenientInput):
    manager_email: str = Field(description="Corporate email address of the manager.")


def _brief(emp: dict[str, Any]) -> dict[str, Any]:
    return {
        "employee_id": emp["id"],
        "email": emp["email"],
        "full_name": emp["full_name"],
        "level": emp["level"],
        "department": emp["department"],
        "role": emp["role"],
    }


@tool(
    "workday_api_get_employee",
    WorkdayGetEmployeeInput,
    "Look up an employee's HR profile (department, level, role, office, manager, employment status) by email.",
)
def get_employee(ctx: ToolContext, args: WorkdayGetEmployeeInput) -> dict[str, Any]:
    emp = employee_by_email(ctx, args.email)
    if emp is None:
        raise ToolError(f"No employee found with the provided email: {args.email}")
    return without_nulls(
        {
            "employee_id": emp["id"],
            "email": emp["email"],
            "full_name": emp["full_name"],
            "level": emp["level"],
            "department": emp["department"],
            "role": emp["role"],
            "office_location": emp["office_location"],
            "start_date": emp["start_date"],
            "manager_id": emp["manager_id"],
            "employment_status": emp["employment_status"],
            "is_contractor": emp["is_contractor"],
            "remote_delivery_address": emp["remote_delivery_address"],
            "contract_end_date": emp["contract_end_date"],
        }
    )


@tool(
    "workday_api_get_manager_chain",
    WorkdayGetManagerChainInput,
    "List an employee's reporting line, starting with the direct manager and going up to the top.",
)
def get_manager_chain(ctx: ToolContext, args: WorkdayGetManagerChainInput) -> dict[str, Any]:
    emp = employee_by_email(ctx, args.email)
    if emp is None:
        raise ToolError(f"Employee not found: {args.email}")
    chain: list[dict[str, Any]] = []
    current = emp
    while current["manager_id"] and len(chain) < _CHAIN_GUARD:
        manager = employee_by_id(ctx, current["manager_id"])
        if manager is None:
            break
        chain.append(_brief(manager))
        current = manager
    return {"manager_chain": chain}


@tool(
    "workday_api_get_org_structure",
    WorkdayGetOrgStructureInput,
    "List the direct reports of a manager, identified by the manager's email.",
)
def get_org_structure(ctx: ToolContext, args: WorkdayGetOrgStructureInput) -> dict[str, Any]:
    manager = employee_by_email(ctx, args.manager_email)
    if manager is None:
        raise ToolError(f"Manager not found: {args.manager_email}")
    reports = [
        {
            **_brief(emp),
            "office_location": emp["office_location"],
            "employment_status": emp["employment_status"],
        }
        for emp in ctx.db.find(EMPLOYEES, manager_id=manager["id"])
    ]
    return {"direct_reports": reports}


TOOLS = (get_employee, get_manager_chain, get_org_structure)
