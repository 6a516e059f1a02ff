"""Asset management: devices, inventory and device assignments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, new_id, opt, pick
from servers.engine.tools import ToolContext, ToolError, ToolInput

DEVICES = "asset_management_devices"
ASSIGNMENTS = "asset_management_device_assignments"
DEVICE_FIELDS = ("id", "device_type", "model", "age_months", "inventory_status", "location")


class AssetInput(ToolInput):
    action: Literal[
        "get_employee_devices",
        "get_device_details",
        "check_inventory",
        "reserve_device",
        "assign_device",
        "retire_device",
    ] = Field(description="What to do.")
    email: str | None = opt("Employee email address (get_employee_devices, assign_device).")
    asset_id: str | None = opt("Device asset id (get_device_details, assign_device, retire_device).")
    device_type: Literal["laptop", "phone", "monitor", "docking_station", "headset", "peripheral"] | None = (
        opt("Kind of device (check_inventory, reserve_device).")
    )
    location: Literal["New York", "San Francisco", "Chicago", "Austin"] | None = opt(
        "Office location (check_inventory, reserve_device)."
    )


def _device(ctx: ToolContext, asset_id: str) -> dict[str, Any]:
    row = ctx.db.require(DEVICES, asset_id, f"Device not found: {asset_id}")
    return row


def _in_stock(ctx: ToolContext, args: Any) -> list[dict[str, Any]]:
    return ctx.db.find(
        DEVICES, device_type=args.device_type, location=args.location, inventory_status="available"
    )


@action("email")
def get_employee_devices(ctx: ToolContext, args: Any) -> Any:
    rows = ctx.db.find(ASSIGNMENTS, employee_email=args.email)
    return {
        "devices": [pick(r, ("id", "asset_id", "employee_email")) for r in rows if r["returned_at"] is None]
    }


@action("asset_id")
def get_device_details(ctx: ToolContext, args: Any) -> Any:
    return {"device_data": pick(_device(ctx, args.asset_id), DEVICE_FIELDS)}


@action("device_type", "location")
def check_inventory(ctx: ToolContext, args: Any) -> Any:
    counts: dict[str, int] = {}
    for row in _in_stock(ctx, args):
        counts[row["model"]] = counts.get(row["model"], 0) + 1
    return {"available_count_by_model": counts}


@action("device_type", "location")
def reserve_device(ctx: ToolContext, args: Any) -> Any:
    candidates = _in_stock(ctx, args)
    if not candidates:
        raise ToolError(f"No available {args.device_type} devices at {args.location}")
    asset_id = min(r["id"] for r in candidates)
    ctx.db.update(DEVICES, asset_id, {"inventory_status": "reserved"})
    return {"reserved_asset_id": asset_id}


@action("email", "asset_id")
def assign_device(ctx: ToolContext, args: Any) -> Any:
    device = _device(ctx, args.asset_id)
    ctx.db.insert(
        ASSIGNMENTS,
        {"id": new_id(ctx, ASSIGNMENTS, "ASMT"), "asset_id": device["id"], "employee_email": args.email},
    )
    ctx.db.update(DEVICES, device["id"], {"inventory_status": "assigned"})
    return SUCCESS


@action("asset_id")
def retire_device(ctx: ToolContext, args: Any) -> Any:
    device = _device(ctx, args.asset_id)
    ctx.db.update(DEVICES, device["id"], {"inventory_status": "retired"})
    return SUCCESS


TOOLS = (
    api_tool(
        "asset_management_api",
        AssetInput,
        "Hardware inventory. get_employee_devices: devices currently assigned to an employee; "
        "get_device_details: one device; check_inventory: available units per model for a type and office; "
        "reserve_device: hold the first available unit of a type at an office; assign_device: give a "
        "device to an employee; retire_device: take a device out of service.",
        "Asset Management",
        {
            "get_employee_devices": get_employee_devices,
            "get_device_details": get_device_details,
            "check_inventory": check_inventory,
            "reserve_device": reserve_device,
            "assign_device": assign_device,
            "retire_device": retire_device,
        },
    ),
)
