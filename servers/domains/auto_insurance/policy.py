"""Policy toolset: policies, vehicles, drivers and document links."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from servers.domains.auto_insurance.common import DOCUMENTS, DRIVERS, POLICIES, VEHICLES, hash_prefix
from servers.engine.helpers import LaxInput, drop_nulls
from servers.engine.tools import ToolContext, ToolError, tool

DriverStatus = Literal["Rated", "Excluded", "Removed"]
VehicleStatus = Literal["Active", "Removed"]
CancellationReason = Literal["User Requested", "Non-Payment", "Underwriting", "Fraud"]
DocumentType = Literal["proof_of_insurance", "declarations_page", "id_card"]

# The document id is hashed over the enum's qualified member name, not its value.
_DOCUMENT_MEMBER = {
    "proof_of_insurance": "DocumentType.PROOF_OF_INSURANCE",
    "declarations_page": "DocumentType.DECLARATIONS_PAGE",
    "id_card": "DocumentType.ID_CARD",
}

_DOC_URL = "https://portal.horizonshield.com/docs/secure/"


class AddDriverInput(LaxInput):
    policy_id: str = Field(description="The policy to add the driver to.")
    name: str = Field(description="The driver's full name.")
    date_of_birth: str = Field(description="The driver's birth date (YYYY-MM-DD).")
    license_number: str | None = Field(default=None, description="Driver's licence number, if known.")
    license_state: str | None = Field(default=None, description="The state that issued the licence.")
    relationship: str = Field(description="How the driver relates to the policyholder (e.g. Spouse, Child).")
    status: DriverStatus = Field(description="Rating status of the new driver.")
    effective_date: str = Field(description="Date the driver joins the policy (YYYY-MM-DD).")
    uw_pending: bool | None = Field(default=False, description="True when underwriting still has to review.")
    exclusion_form_required: bool | None = Field(
        default=False, description="True when a signed exclusion form is needed."
    )


class AddVehicleInput(LaxInput):
    policy_id: str = Field(description="The policy to add the vehicle to.")
    vin: str = Field(description="The vehicle's 17-character VIN.")
    year: int = Field(description="Model year.")
    make: str = Field(description="Manufacturer.")
    model: str = Field(description="Model name.")
    effective_date: str = Field(description="Date coverage starts for the vehicle (YYYY-MM-DD).")
    uw_pending: bool | None = Field(default=None, description="True when underwriting still has to review.")


class DocumentLinkInput(LaxInput):
    policy_id: str = Field(description="The policy the document belongs to.")
    document_type: DocumentType = Field(description="Which document to link.")
    ticket_id: str = Field(description="The support ticket this request is tracked on.")
    expiration_date: str = Field(description="When the link stops working, as an ISO 8601 date-time.")


class PolicyIdInput(LaxInput):
    policy_id: str = Field(description="The policy id (POL-##########).")


class PolicyListInput(LaxInput):
    policy_id: str = Field(description="The policy id (POL-##########).")
    active_only: bool | None = Field(default=None, description="When true, leave out inactive entries.")


class VehicleIdInput(LaxInput):
    vehicle_id: str = Field(description="The vehicle id.")


class ReinstateInput(LaxInput):
    policy_id: str = Field(description="The policy to reinstate.")
    lapse_flag: bool = Field(description="True when coverage lapsed before reinstatement.")
    lapse_start: str | None = Field(default=None, description="First day without coverage (YYYY-MM-DD).")
    lapse_end: str | None = Field(default=None, description="Last day without coverage (YYYY-MM-DD).")


class ScheduleCancellationInput(LaxInput):
    policy_id: str = Field(description="The policy to cancel.")
    cancellation_date: str = Field(description="Date the cancellation takes effect (YYYY-MM-DD).")
    cancellation_reason: CancellationReason = Field(description="Why the policy is cancelled.")


class DriverStatusInput(LaxInput):
    driver_id: str = Field(description="The driver id.")
    new_status: DriverStatus = Field(description="The driver's new status.")
    effective_date: str = Field(description="Date the change takes effect (YYYY-MM-DD).")


class VehicleStatusInput(LaxInput):
    vehicle_id: str = Field(description="The vehicle id.")
    new_status: VehicleStatus = Field(description="The vehicle's new status.")
    effective_date: str = Field(description="Date the change takes effect (YYYY-MM-DD).")


def _policy(ctx: ToolContext, policy_id: str) -> dict[str, Any]:
    row = ctx.db.require(POLICIES, policy_id, f"Policy with ID '{policy_id}' not found")
    return row


def _vehicle(ctx: ToolContext, vehicle_id: str) -> dict[str, Any]:
    row = ctx.db.require(VEHICLES, vehicle_id, f"Vehicle with ID '{vehicle_id}' not found")
    return row


@tool(
    "policy_add_driver",
    AddDriverInput,
    "Add a driver to a policy (rated, excluded or removed). A driver with the same name and birth date "
    "already on the policy is refused.",
)
def add_driver(ctx: ToolContext, args: AddDriverInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    if ctx.db.first(DRIVERS, policy_id=args.policy_id, name=args.name, date_of_birth=args.date_of_birth):
        raise ToolError(
            f"Driver with name '{args.name}' and DOB '{args.date_of_birth}' already exists on this policy"
        )
    driver_id = "DRV-2-" + hash_prefix(f"{args.policy_id}_{args.name}_{args.date_of_birth}", 8)
    existing = ctx.db.get(DRIVERS, driver_id)
    if existing is not None:
        return {"driver_id": driver_id, "status": existing["status"]}
    ctx.db.insert(
        DRIVERS,
        {
            "id": driver_id,
            "policy_id": args.policy_id,
            "customer_id": None,
            "name": args.name,
            "date_of_birth": args.date_of_birth,
            "license_number": args.license_number,
            "license_state": args.license_state,
            "relationship": args.relationship,
            "status": args.status,
            "effective_date": args.effective_date,
            "removal_date": None,
            "is_named_insured": False,
            "is_co_insured": False,
            "uw_pending": bool(args.uw_pending),
            "exclusion_form_required": bool(args.exclusion_form_required),
        },
    )
    return {"driver_id": driver_id, "status": args.status}


@tool(
    "policy_add_vehicle",
    AddVehicleInput,
    "Add a vehicle to a policy with standard coverages. A VIN already on the policy is refused.",
)
def add_vehicle(ctx: ToolContext, args: AddVehicleInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    if ctx.db.first(VEHICLES, policy_id=args.policy_id, vin=args.vin):
        raise ToolError(f"VIN '{args.vin}' already exists on this policy")
    vehicle_id = "VEH-2-" + hash_prefix(f"{args.policy_id}_{args.vin}", 8)
    if ctx.db.exists(VEHICLES, vehicle_id):
        return {"vehicle_id": vehicle_id}
    ctx.db.insert(
        VEHICLES,
        {
            "id": vehicle_id,
            "policy_id": args.policy_id,
            "vin": args.vin,
            "year": args.year,
            "make": args.make,
            "model": args.model,
            "status": "Active",
            "effective_date": args.effective_date,
            "removal_date": None,
            "date_added_to_policy": args.effective_date,
            "collision_coverage": True,
            "comprehensive_coverage": True,
            "rental_coverage": False,
            "uw_pending": bool(args.uw_pending),
        },
    )
    return {"vehicle_id": vehicle_id}


def _valid_iso(value: str) -> bool:
    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@tool(
    "policy_generate_document_link",
    DocumentLinkInput,
    "Create a secure, expiring portal link to a policy document (proof of insurance, declarations page or "
    "ID card). Asking again for the same policy, document and ticket returns the existing link.",
)
def generate_document_link(ctx: ToolContext, args: DocumentLinkInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    if not _valid_iso(args.expiration_date):
        raise ToolError(
            f"Invalid expiration_date format: '{args.expiration_date}'. "
            "Expected ISO 8601 format (e.g., '2024-01-16T10:05:00Z')"
        )
    doc_id = "DOC-2-" + hash_prefix(
        f"{args.policy_id}_{_DOCUMENT_MEMBER[args.document_type]}_{args.ticket_id}", 8
    )
    existing = ctx.db.get(DOCUMENTS, doc_id)
    if existing is not None:
        return {"document_id": doc_id, "url": existing["url"], "expires_at": existing["expires_at"]}
    url = f"{_DOC_URL}{args.policy_id}_{args.document_type}_{args.ticket_id}"
    ctx.db.insert(
        DOCUMENTS,
        {
            "id": doc_id,
            "policy_id": args.policy_id,
            "ticket_id": args.ticket_id,
            "document_type": args.document_type,
            "url": url,
            "created_at": args.expiration_date,
            "expires_at": args.expiration_date,
        },
    )
    return {"document_id": doc_id, "url": url, "expires_at": args.expiration_date}


@tool(
    "policy_get_policy_details",
    PolicyIdInput,
    "Show a policy's core record: holder, status, state, term dates, cancellation data, insureds, extension "
    "days, at-fault claim count and lapse flag.",
)
def get_policy_details(ctx: ToolContext, args: PolicyIdInput) -> dict[str, Any]:
    p = _policy(ctx, args.policy_id)
    return drop_nulls(
        {
            "policy_id": p["id"],
            "customer_id": p["customer_id"],
            "status": p["status"],
            "state": p["state"],
            "effective_date": p["effective_date"],
            "expiration_date": p["expiration_date"],
            "renewal_date": p["renewal_date"],
            "cancellation_date": p["cancellation_date"],
            "cancellation_reason": p["cancellation_reason"],
            "named_insured_id": p["named_insured_id"],
            "co_insured_id": p["co_insured_id"],
            "automatic_extension_days": p["automatic_extension_days"],
            "at_fault_claims_3_years": p["at_fault_claims_3_years"],
            "lapse_flag": p["lapse_flag"],
        }
    )


@tool(
    "policy_get_policy_drivers",
    PolicyListInput,
    "List the drivers on a policy; with active_only, only rated and excluded drivers.",
)
def get_policy_drivers(ctx: ToolContext, args: PolicyListInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    drivers = [
        {
            "id": d["id"],
            "name": d["name"],
            "date_of_birth": d["date_of_birth"],
            "status": d["status"],
            "effective_date": d["effective_date"],
            "is_named_insured": d["is_named_insured"],
            "is_co_insured": d["is_co_insured"],
        }
        for d in ctx.db.find(DRIVERS, policy_id=args.policy_id)
        if not args.active_only or d["status"] in ("Rated", "Excluded")
    ]
    return {"drivers": drivers, "driver_count": len(drivers)}


@tool(
    "policy_get_policy_vehicles",
    PolicyListInput,
    "List the vehicles on a policy; with active_only, only active vehicles.",
)
def get_policy_vehicles(ctx: ToolContext, args: PolicyListInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    vehicles = [
        {
            "id": v["id"],
            "vin": v["vin"],
            "year": v["year"],
            "make": v["make"],
            "model": v["model"],
            "status": v["status"],
            "effective_date": v["effective_date"],
        }
        for v in ctx.db.find(VEHICLES, policy_id=args.policy_id)
        if not args.active_only or v["status"] == "Active"
    ]
    return {"vehicles": vehicles, "vehicle_count": len(vehicles)}


@tool(
    "policy_get_vehicle_details",
    VehicleIdInput,
    "Show one vehicle with its coverages (collision, comprehensive, rental) and underwriting flag.",
)
def get_vehicle_details(ctx: ToolContext, args: VehicleIdInput) -> dict[str, Any]:
    v = _vehicle(ctx, args.vehicle_id)
    return {
        "vehicle_id": v["id"],
        "policy_id": v["policy_id"],
        "vin": v["vin"],
        "year": v["year"],
        "make": v["make"],
        "model": v["model"],
        "status": v["status"],
        "effective_date": v["effective_date"],
        "date_added_to_policy": v["date_added_to_policy"],
        "collision_coverage": v["collision_coverage"],
        "comprehensive_coverage": v["comprehensive_coverage"],
        "rental_coverage": v["rental_coverage"],
        "uw_pending": v["uw_pending"],
    }


@tool(
    "policy_reinstate_policy",
    ReinstateInput,
    "Make a policy Active again and clear its cancellation; with lapse_flag true the lapse period is recorded.",
)
def reinstate_policy(ctx: ToolContext, args: ReinstateInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    changes: dict[str, Any] = {
        "status": "Active",
        "cancellation_date": None,
        "cancellation_reason": None,
        "lapse_flag": args.lapse_flag,
    }
    if args.lapse_flag:
        changes["lapse_start"] = args.lapse_start
        changes["lapse_end"] = args.lapse_end
    ctx.db.update(POLICIES, args.policy_id, changes)
    return {"policy_id": args.policy_id, "status": "Active", "lapse_flag": args.lapse_flag}


@tool(
    "policy_schedule_cancellation",
    ScheduleCancellationInput,
    "Schedule a policy's cancellation for a date with a reason; the policy becomes Pending Cancellation.",
)
def schedule_cancellation(ctx: ToolContext, args: ScheduleCancellationInput) -> dict[str, Any]:
    _policy(ctx, args.policy_id)
    ctx.db.update(
        POLICIES,
        args.policy_id,
        {
            "status": "Pending Cancellation",
            "cancellation_date": args.cancellation_date,
            "cancellation_reason": args.cancellation_reason,
        },
    )
    return {"policy_id": args.policy_id, "status": "Pending Cancellation"}


@tool(
    "policy_update_driver_status",
    DriverStatusInput,
    "Change a driver's status on the policy (rated, excluded or removed) as of a date.",
)
def update_driver_status(ctx: ToolContext, args: DriverStatusInput) -> dict[str, Any]:
    ctx.db.require(DRIVERS, args.driver_id, f"Driver with ID '{args.driver_id}' not found")
    changes: dict[str, Any] = {"status": args.new_status, "effective_date": args.effective_date}
    if args.new_status == "Removed":
        changes["removal_date"] = args.effective_date
    ctx.db.update(DRIVERS, args.driver_id, changes)
    return {"driver_id": args.driver_id, "status": args.new_status}


@tool(
    "policy_update_vehicle_status",
    VehicleStatusInput,
    "Change a vehicle's status on the policy (active or removed) as of a date.",
)
def update_vehicle_status(ctx: ToolContext, args: VehicleStatusInput) -> dict[str, Any]:
    _vehicle(ctx, args.vehicle_id)
    changes: dict[str, Any] = {"status": args.new_status}
    if args.new_status == "Removed":
        changes["removal_date"] = args.effective_date
    ctx.db.update(VEHICLES, args.vehicle_id, changes)
    return {"vehicle_id": args.vehicle_id, "status": args.new_status}


TOOLS = (
    add_driver,
    add_vehicle,
    generate_document_link,
    get_policy_details,
    get_policy_drivers,
    get_policy_vehicles,
    get_vehicle_details,
    reinstate_policy,
    schedule_cancellation,
    update_driver_status,
    update_vehicle_status,
)
