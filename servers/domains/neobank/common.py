"""Shared pieces of the neobank IT help-desk toolset: table names, the
domain's fixed clocks, enums and the employee look-up rule (the lax input
base, null omission and count-based ids live in `servers.engine.helpers`)."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from servers.engine.tools import ToolContext, ToolError

PREFIX = "sandbox_neobank_support_main_models_"
EMPLOYEES = PREFIX + "employees"
APP_ACCESS = PREFIX + "okta_app_access"
GROUP_MEMBERSHIP = PREFIX + "okta_group_membership"
SOFTWARE_LICENSES = PREFIX + "software_licenses"
LICENSE_ALLOCATIONS = PREFIX + "license_allocations"
HARDWARE_ASSETS = PREFIX + "hardware_assets"
ASSET_ASSIGNMENTS = PREFIX + "asset_assignments"
APPROVAL_REQUESTS = PREFIX + "approval_requests"
PROCUREMENT_ORDERS = PREFIX + "procurement_orders"
EMAIL_NOTIFICATIONS = PREFIX + "email_notifications"
SECURITY_INCIDENTS = PREFIX + "security_incidents"
SECURITY_AUDIT = PREFIX + "okta_security_audit"

# The domain's own clocks (the tools never read the wall clock).
ASSET_NOW = dt.datetime(2025, 12, 17, 10, 0, 0, tzinfo=dt.UTC)  # device age; retirement `returned_at`
ASSET_NOW_TEXT = "2025-12-17T10:00:00Z"
OKTA_ACTION_NOW = dt.datetime(2025, 12, 18, 10, 0, 0, tzinfo=dt.UTC)  # security audit `performed_at`
INCIDENT_NOW = dt.datetime(2025, 12, 18, 10, 0, 0, tzinfo=dt.UTC)  # incidents: 24 h look-back anchor

# Who the tools record as the actor of a change.
SYSTEM_ACTOR = "system"


class DeviceType(StrEnum):
    laptop_standard = "laptop_standard"
    laptop_premium = "laptop_premium"
    monitor = "monitor"
    docking_station = "docking_station"
    headset = "headset"
    keyboard = "keyboard"
    mouse = "mouse"


class WarehouseLocation(StrEnum):
    sf = "sf"
    nyc = "nyc"
    austin = "austin"
    remote_ship = "remote_ship"


def employee_by_email(ctx: ToolContext, email: str) -> dict[str, Any] | None:
    """First employee in store order whose email matches exactly."""
    return ctx.db.first(EMPLOYEES, email=email)


def require_employee(ctx: ToolContext, email: str, missing: str = "Employee not found") -> dict[str, Any]:
    """`employee_by_email`, failing with `<missing>: <email>` when there is none."""
    emp = employee_by_email(ctx, email)
    if emp is None:
        raise ToolError(f"{missing}: {email}")
    return emp


def employee_by_id(ctx: ToolContext, employee_id: str) -> dict[str, Any] | None:
    return ctx.db.first(EMPLOYEES, id=employee_id)
