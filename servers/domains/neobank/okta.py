"""Okta: application access, group membership and identity/MFA security actions."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import Field

from servers.domains.neobank.common import (
    APP_ACCESS,
    GROUP_MEMBERSHIP,
    OKTA_ACTION_NOW,
    SECURITY_AUDIT,
    SYSTEM_ACTOR,
    require_employee,
)
from servers.engine.helpers import LaxInput, count_id, drop_nulls
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

GenericAccessLevel = StrEnum(
    "GenericAccessLevel",
    [
        ("none", "none"),
        ("read_only", "read_only"),
        ("read_write", "read_write"),
        ("write", "write"),
        ("admin", "admin"),
        ("member", "member"),
        ("user", "user"),
        ("viewer", "viewer"),
        ("editor", "editor"),
        ("analyst", "analyst"),
        ("standard", "standard"),
        ("elevated", "elevated"),
        ("standard_employee", "standard_employee"),
        ("write non-PII only", "write non-PII only"),
        ("engineer_prod", "engineer_prod"),
    ],
)


class OktaSecurityOperation(StrEnum):
    send_verification_manager = "send_verification_manager"
    send_verification_assistant = "send_verification_assistant"
    send_verification_sms = "send_verification_sms"
    send_verification_video_call = "send_verification_video_call"
    unlock_account = "unlock_account"
    force_password_reset = "force_password_reset"
    invalidate_all_sessions = "invalidate_all_sessions"
    set_temporary_bypass = "set_temporary_bypass"
    add_mfa_device = "add_mfa_device"
    send_mfa_enrollment_link = "send_mfa_enrollment_link"
    remove_mfa_device = "remove_mfa_device"


MFA_DEVICE_OPERATIONS = ("add_mfa_device", "remove_mfa_device")
MAX_BYPASS_HOURS = 4


class OktaAddToGroupInput(LaxInput):
    email: str = Field(description="Corporate email of the employee.")
    group_name: str = Field(description="Name of the Okta group to join (exact text).")


class OktaCheckAccessInput(LaxInput):
    email: str = Field(description="Corporate email of the employee.")
    app_name: str = Field(description="Application name, matched exactly (case-sensitive).")


class OktaGetUserGroupsInput(LaxInput):
    email: str = Field(description="Corporate email of the employee.")


class OktaProvisionAccessInput(LaxInput):
    email: str = Field(description="Corporate email of the employee receiving access.")
    app_name: str = Field(description="Application to grant, stored exactly as given.")
    access_level: GenericAccessLevel = Field(description="Permission level to grant.")
    is_temporary: bool = Field(default=False, description="True for a time-limited grant.")
    access_expiry_date: str | None = Field(
        default=None, description="When a temporary grant ends (ISO-8601 text, stored as given)."
    )


class OktaRevokeAccessInput(LaxInput):
    email: str = Field(description="Corporate email of the employee.")
    app_name: str = Field(description="Application whose active access is removed (exact text).")


class OktaSecurityExecuteActionInput(ToolInput):
    email: str = Field(description="Corporate email of the employee the action applies to.")
    operation: OktaSecurityOperation = Field(description="The security operation to perform.")
    mfa_device_id: str | None = Field(
        default=None, description="MFA device identifier; needed to add or remove an MFA device."
    )
    bypass_duration_hours: int | None = Field(
        default=None,
        description="Length of a temporary MFA bypass in hours (at most 4); needed for a bypass.",
    )
    ticket_id: str | None = Field(default=None, description="Help-desk ticket the action belongs to.")
    bypass_expires_at: str | None = Field(
        default=None,
        description="Optional ISO-8601 end time; a bypass's end is always computed from its duration.",
    )


def _active_access(ctx: ToolContext, employee_id: str, app_name: str) -> dict[str, Any] | None:
    return ctx.db.first(APP_ACCESS, employee_id=employee_id, app_name=app_name, is_active=True)


@tool(
    "okta_api_add_to_group",
    OktaAddToGroupInput,
    "Add an employee to an Okta group; fails if they are already an active member.",
)
def add_to_group(ctx: ToolContext, args: OktaAddToGroupInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    if ctx.db.first(GROUP_MEMBERSHIP, employee_id=emp["id"], group_name=args.group_name, is_active=True):
        raise ToolError(f"Employee is already a member of this group: {args.group_name}")
    membership_id = count_id(ctx.db, GROUP_MEMBERSHIP, "OGM-%08d")
    ctx.db.insert(
        GROUP_MEMBERSHIP,
        {
            "id": membership_id,
            "employee_id": emp["id"],
            "group_name": args.group_name,
            "added_at": None,
            "added_by": SYSTEM_ACTOR,
            "is_active": True,
        },
    )
    return {"membership_id": membership_id}


@tool(
    "okta_api_check_access",
    OktaCheckAccessInput,
    "Tell whether an employee currently has active access to an application, and at which level.",
)
def check_access(ctx: ToolContext, args: OktaCheckAccessInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    row = _active_access(ctx, emp["id"], args.app_name)
    if row is None:
        return {"has_access": False}
    return drop_nulls(
        {"has_access": True, "access_level": row["access_level"], "granted_at": row["granted_at"]}
    )


@tool(
    "okta_api_get_user_groups",
    OktaGetUserGroupsInput,
    "List the Okta groups an employee is an active member of.",
)
def get_user_groups(ctx: ToolContext, args: OktaGetUserGroupsInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    groups = [
        drop_nulls({"group_name": m["group_name"], "added_at": m["added_at"]})
        for m in ctx.db.find(GROUP_MEMBERSHIP, employee_id=emp["id"], is_active=True)
    ]
    return {"groups": groups}


@tool(
    "okta_api_provision_access",
    OktaProvisionAccessInput,
    "Grant an employee access to an application at a given level, optionally as a temporary grant.",
)
def provision_access(ctx: ToolContext, args: OktaProvisionAccessInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email, "Employee not found in Okta directory")
    if _active_access(ctx, emp["id"], args.app_name) is not None:
        raise ToolError(f"Employee already has access to this application: {args.app_name}")
    access_id = count_id(ctx.db, APP_ACCESS, "OAA-%08d")
    ctx.db.insert(
        APP_ACCESS,
        {
            "id": access_id,
            "employee_id": emp["id"],
            "app_name": args.app_name,
            "access_level": args.access_level.value,
            "granted_at": None,
            "granted_by": SYSTEM_ACTOR,
            "is_active": True,
            "revoked_at": None,
            "is_temporary": args.is_temporary,
            "expires_at": args.access_expiry_date,
        },
    )
    return {"app_access_id": access_id}


@tool(
    "okta_api_revoke_access",
    OktaRevokeAccessInput,
    "Deactivate an employee's active access to an application.",
)
def revoke_access(ctx: ToolContext, args: OktaRevokeAccessInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    row = _active_access(ctx, emp["id"], args.app_name)
    if row is None:
        raise ToolError(f"No active access found to revoke for application: {args.app_name}")
    ctx.db.update(APP_ACCESS, row["id"], {"is_active": False})
    return {"revoked": True}


def _parse_iso(value: str) -> dt.datetime:
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    return dt.datetime.fromisoformat(text)


@tool(
    "okta_security_api_execute_action",
    OktaSecurityExecuteActionInput,
    "Run an Okta identity or MFA security operation for an employee (verification, unlock, password reset, "
    "session invalidation, temporary MFA bypass, MFA device changes) and record it in the security audit log.",
)
def execute_action(ctx: ToolContext, args: OktaSecurityExecuteActionInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email, "Employee not found in Okta directory")
    operation = args.operation.value
    if operation in MFA_DEVICE_OPERATIONS and not args.mfa_device_id:
        raise ToolError(f"mfa_device_id is required for {operation} operation")
    is_bypass = operation == "set_temporary_bypass"
    if is_bypass:
        if not args.bypass_duration_hours:
            raise ToolError("bypass_duration_hours is required for set_temporary_bypass operation")
        if args.bypass_duration_hours > MAX_BYPASS_HOURS:
            raise ToolError(f"bypass_duration_hours cannot exceed {MAX_BYPASS_HOURS} hours")
    elif args.bypass_expires_at:
        # Checked for well-formedness only; the value is never stored.
        try:
            _parse_iso(args.bypass_expires_at)
        except ValueError as exc:
            raise ToolError(f"Failed to execute security action: {exc}") from exc

    hours = args.bypass_duration_hours if is_bypass else None
    audit_id = count_id(ctx.db, SECURITY_AUDIT, "OSA-%08d")
    ctx.db.insert(
        SECURITY_AUDIT,
        {
            "id": audit_id,
            "employee_id": emp["id"],
            "operation": operation,
            "performed_by": SYSTEM_ACTOR,
            "performed_at": OKTA_ACTION_NOW,
            "reason": f"Security operation: {operation}",
            "ticket_id": args.ticket_id,
            "verification_method": None,
            "success": True,
            "bypass_duration_hours": hours,
            "bypass_expires_at": OKTA_ACTION_NOW + dt.timedelta(hours=hours) if hours else None,
            "mfa_device_id": args.mfa_device_id if operation in MFA_DEVICE_OPERATIONS else None,
        },
    )
    return {"success": True, "audit_id": audit_id}


TOOLS = (add_to_group, check_access, get_user_groups, provision_access, revoke_access, execute_action)
