"""Hardware asset management: inventory, device details, assignment and retirement."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from servers.domains.neobank.common import (
    ASSET_ASSIGNMENTS,
    ASSET_NOW,
    ASSET_NOW_TEXT,
    HARDWARE_ASSETS,
    SYSTEM_ACTOR,
    DeviceType,
    WarehouseLocation,
    require_employee,
)
from servers.engine.helpers import count_id, drop_nulls
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

RETIRED = "retired"
AVAILABLE_CONDITIONS = ("new", "good")


class DeviceInfo(BaseModel):
    """One device in an employee's device list. `assigned_at` is required:
    an assignment without a time (what `assign_device` creates) cannot be
    listed, and the call fails with the model's validation error."""

    asset_id: str
    device_type: DeviceType
    device_model: str
    assigned_at: str
    condition: str
    age_months: int


class AssignDeviceInput(ToolInput):
    asset_id: str = Field(description="Identifier of the hardware asset, e.g. VDB-HW-12345.")
    email: str = Field(description="Corporate email of the employee receiving the device.")


class CheckInventoryInput(ToolInput):
    device_type: str = Field(
        description="Device type: laptop_standard, laptop_premium, monitor, docking_station, headset, keyboard or mouse."
    )
    warehouse_location: str = Field(description="Warehouse: sf, nyc, austin or remote_ship.")


class GetDeviceDetailsInput(ToolInput):
    asset_id: str = Field(description="Identifier of the hardware asset.")


class GetEmployeeDevicesInput(ToolInput):
    email: str = Field(description="Corporate email of the employee.")


class RetireDeviceInput(ToolInput):
    asset_id: str = Field(description="Identifier of the hardware asset to retire.")


def age_months(asset: dict[str, Any]) -> int:
    """Whole 30-day periods between the purchase and the asset clock."""
    text = asset["purchase_date"]
    try:
        if not text:
            raise ValueError(text)
        purchased = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise ToolError(f"Invalid purchase_date for asset {asset['id']}: {text!r}") from None
    if purchased.tzinfo is None:
        purchased = purchased.replace(tzinfo=dt.UTC)
    days = (ASSET_NOW - purchased).days
    return int(days / 30)


def _asset(ctx: ToolContext, asset_id: str) -> dict[str, Any]:
    asset = ctx.db.require_first(HARDWARE_ASSETS, f"Asset not found: {asset_id}", id=asset_id)
    return asset


@tool(
    "asset_management_api_assign_device",
    AssignDeviceInput,
    "Assign an unassigned, non-retired hardware asset to an employee.",
)
def assign_device(ctx: ToolContext, args: AssignDeviceInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    asset = _asset(ctx, args.asset_id)
    if asset["is_assigned"]:
        raise ToolError(f"Asset {args.asset_id} is already assigned")
    if asset["condition"] == RETIRED:
        raise ToolError(f"Cannot assign retired asset: {args.asset_id}")
    assignment_id = count_id(ctx.db, ASSET_ASSIGNMENTS, "ASN-%08d")
    ctx.db.insert(
        ASSET_ASSIGNMENTS,
        {
            "id": assignment_id,
            "asset_id": asset["id"],
            "employee_id": emp["id"],
            "assigned_at": None,
            "assigned_by": SYSTEM_ACTOR,
            "is_active": True,
            "returned_at": None,
        },
    )
    ctx.db.update(HARDWARE_ASSETS, asset["id"], {"is_assigned": True})
    return {"assignment_id": assignment_id, "asset_id": asset["id"], "employee_id": emp["id"]}


@tool(
    "asset_management_api_check_inventory",
    CheckInventoryInput,
    "Count the devices of a type held at a warehouse and list the ones free to hand out (unassigned, new or good).",
)
def check_inventory(ctx: ToolContext, args: CheckInventoryInput) -> dict[str, Any]:
    if args.device_type not in {d.value for d in DeviceType}:
        raise ToolError(f"Invalid device type: {args.device_type}")
    if args.warehouse_location not in {w.value for w in WarehouseLocation}:
        raise ToolError(f"Invalid warehouse location: {args.warehouse_location}")
    candidates = [
        a
        for a in ctx.db.find(
            HARDWARE_ASSETS, device_type=args.device_type, warehouse_location=args.warehouse_location
        )
        if a["condition"] != RETIRED
    ]
    free = [a for a in candidates if not a["is_assigned"] and a["condition"] in AVAILABLE_CONDITIONS]
    return {
        "device_type": args.device_type,
        "warehouse_location": args.warehouse_location,
        "available_count": len(free),
        "total_count": len(candidates),
        "asset_ids": [{"device_model": a["device_model"], "asset_id": a["id"]} for a in free],
    }


@tool(
    "asset_management_api_get_device_details",
    GetDeviceDetailsInput,
    "Show a hardware asset's type, model, purchase date, age in months, condition, warehouse and current holder.",
)
def get_device_details(ctx: ToolContext, args: GetDeviceDetailsInput) -> dict[str, Any]:
    asset = _asset(ctx, args.asset_id)
    holder = None
    if asset["is_assigned"]:
        assignment = ctx.db.first(ASSET_ASSIGNMENTS, asset_id=asset["id"], is_active=True)
        holder = assignment["employee_id"] if assignment is not None else None
    return drop_nulls(
        {
            "asset_id": asset["id"],
            "device_type": asset["device_type"],
            "device_model": asset["device_model"],
            "purchase_date": asset["purchase_date"],
            "age_months": age_months(asset),
            "condition": asset["condition"],
            "warehouse_location": asset["warehouse_location"],
            "is_assigned": asset["is_assigned"],
            "assigned_to": holder,
        }
    )


@tool(
    "asset_management_api_get_employee_devices",
    GetEmployeeDevicesInput,
    "List the hardware currently assigned to an employee, with each device's condition and age in months.",
)
def get_employee_devices(ctx: ToolContext, args: GetEmployeeDevicesInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    devices = []
    for assignment in ctx.db.find(ASSET_ASSIGNMENTS, employee_id=emp["id"], is_active=True):
        asset = ctx.db.first(HARDWARE_ASSETS, id=assignment["asset_id"])
        if asset is None:
            continue
        try:
            info = DeviceInfo(
                asset_id=asset["id"],
                device_type=asset["device_type"],
                device_model=asset["device_model"],
                assigned_at=assignment["assigned_at"],
                condition=asset["condition"],
                age_months=age_months(asset),
            )
        except ValidationError as exc:
            raise ToolError(str(exc)) from exc
        devices.append(info.model_dump(mode="json", exclude_none=True))
    return {"employee_id": emp["id"], "devices": devices}


@tool(
    "asset_management_api_retire_device",
    RetireDeviceInput,
    "Retire a hardware asset; if it is assigned, its active assignments are closed as returned.",
)
def retire_device(ctx: ToolContext, args: RetireDeviceInput) -> dict[str, Any]:
    asset = _asset(ctx, args.asset_id)
    previous = asset["condition"]
    if previous == RETIRED:
        raise ToolError(f"Asset {args.asset_id} is already retired")
    was_assigned = asset["is_assigned"]
    if was_assigned:
        for assignment in ctx.db.find(ASSET_ASSIGNMENTS, asset_id=asset["id"], is_active=True):
            ctx.db.update(
                ASSET_ASSIGNMENTS, assignment["id"], {"is_active": False, "returned_at": ASSET_NOW_TEXT}
            )
    ctx.db.update(HARDWARE_ASSETS, asset["id"], {"condition": RETIRED, "is_assigned": False})
    return {
        "asset_id": asset["id"],
        "previous_condition": previous,
        "retired_at": ASSET_NOW_TEXT,
        "was_assigned": was_assigned,
    }


TOOLS = (assign_device, check_inventory, get_device_details, get_employee_devices, retire_device)
