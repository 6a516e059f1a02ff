"""Workday HR look-ups (read-only)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.neobank.common import EMPLOYEES, employee_by_id, require_employee
from servers.engine.helpers import LaxInput, drop_nulls
from servers.engine.tools import ToolContext, tool

# A manager chain longer than the table can only come from a cycle.
_CHAIN_GUARD = 10_000


class WorkdayGetEmployeeInput(LaxInput):
    email: str = Field(description="Corporate email address of the employee.")


class WorkdayGetManagerChainInput(LaxInput):
    email: str = Field(description="Corporate email address of the employee whose managers are wanted.")


class WorkdayGetOrgStructureInput(LaxInput):
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
    emp = require_employee(ctx, args.email, "No employee found with the provided email")
    return drop_nulls(
        {
            **_brief(emp),
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
    emp = require_employee(ctx, args.email)
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
    manager = require_employee(ctx, args.manager_email, "Manager not found")
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
