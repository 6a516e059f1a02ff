"""Claims toolset: First Notice of Loss and claim look-ups."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from servers.domains.auto_insurance.common import CLAIMS, DRIVERS, POLICIES, VEHICLES, hash_prefix
from servers.engine.helpers import LaxInput
from servers.engine.tools import ToolContext, ToolError, tool

ClaimType = Literal[
    "Collision – Single Vehicle",
    "Collision – Multi-Vehicle",
    "Collision – Hit and Run",
    "Collision – Parked Vehicle",
    "Comprehensive – Theft",
    "Comprehensive – Vandalism",
    "Comprehensive – Weather",
    "Comprehensive – Fire",
    "Comprehensive – Glass Only",
    "Comprehensive – Animal Strike",
    "Liability Only",
]
ClaimSeverity = Literal["Minor", "Moderate", "Major"]
SIUFlag = Literal["None", "Suspicious Activity Flagged", "Confirmed SIU Referral"]

INITIAL_STAGE = "Open – Initial Review"
# Without any claim the look-back reference date would be this far-future day.
_NO_CLAIMS_REFERENCE = "2099-12-31"


class OpenMajorClaimsInput(LaxInput):
    policy_id: str = Field(description="The policy to check.")


class CreateFnolInput(LaxInput):
    policy_id: str = Field(description="The policy the loss is reported on.")
    vehicle_id: str | None = Field(default=None, description="Id of the vehicle involved, if on the policy.")
    vehicle_vin: str | None = Field(default=None, description="VIN of the vehicle involved.")
    driver_id: str | None = Field(default=None, description="Id of the driver at the time of loss.")
    date_of_loss: str = Field(description="When the loss happened (YYYY-MM-DD).")
    loss_location: str = Field(description="Where the loss happened.")
    claim_type: ClaimType = Field(description="Kind of loss.")
    severity: ClaimSeverity = Field(description="How serious the loss is.")
    siu_flag: SIUFlag | None = Field(default=None, description="Special Investigations Unit marker, if any.")
    unlisted_driver_flag: bool | None = Field(
        default=None, description="True when the driver is not on the policy."
    )
    has_bodily_injury: bool | None = Field(default=None, description="True when someone was hurt.")
    police_report_required: bool | None = Field(
        default=None, description="True when a police report is needed."
    )
    police_report_number: str | None = Field(default=None, description="The police report number, if any.")
    other_party_name: str | None = Field(default=None, description="Name of the other party.")
    other_party_phone: str | None = Field(default=None, description="Phone number of the other party.")
    other_party_insurance: str | None = Field(default=None, description="The other party's insurer.")


class DriverClaimsInput(LaxInput):
    driver_id: str = Field(description="The driver whose claims are listed.")
    open_only: bool = Field(default=False, description="When true, only claims still open.")


class PolicyClaimsInput(LaxInput):
    policy_id: str = Field(description="The policy whose claims are listed.")
    months_back: int | None = Field(
        default=None,
        description="Only claims created within this many months (30-day months); empty for all.",
    )


class VehicleClaimsInput(LaxInput):
    vehicle_id: str = Field(description="The vehicle whose claims are listed.")
    open_only: bool | None = Field(default=False, description="When true, only claims still open.")


def _is_open(claim: dict[str, Any]) -> bool:
    return str(claim["claim_stage"]).startswith("Open")


def _item(claim: dict[str, Any]) -> dict[str, Any]:
    return {
        "claim_id": claim["id"],
        "date_of_loss": claim["date_of_loss"],
        "claim_type": claim["claim_type"],
        "claim_stage": claim["claim_stage"],
        "severity": claim["severity"],
        "created_date": claim["created_date"],
    }


def _require_policy(ctx: ToolContext, policy_id: str) -> None:
    ctx.db.require(POLICIES, policy_id, f"Policy '{policy_id}' not found.")


@tool(
    "claims_check_open_major_claims",
    OpenMajorClaimsInput,
    "Tell whether a policy has open claims of Major severity, and how many.",
)
def check_open_major_claims(ctx: ToolContext, args: OpenMajorClaimsInput) -> dict[str, Any]:
    _require_policy(ctx, args.policy_id)
    count = sum(
        1 for c in ctx.db.find(CLAIMS, policy_id=args.policy_id) if _is_open(c) and c["severity"] == "Major"
    )
    return {"has_major_claim": count > 0, "major_claim_count": count}


@tool(
    "claims_create_fnol",
    CreateFnolInput,
    "File a First Notice of Loss: opens a claim in initial review. Filing again for the same policy, loss "
    "date and vehicle returns the existing claim.",
)
def create_fnol(ctx: ToolContext, args: CreateFnolInput) -> dict[str, Any]:
    _require_policy(ctx, args.policy_id)
    vehicle_part = args.vehicle_id or args.vehicle_vin or "no_vehicle"
    claim_id = "CLM-2" + hash_prefix(f"{args.policy_id}_{args.date_of_loss}_{vehicle_part}", 9)
    existing = ctx.db.get(CLAIMS, claim_id)
    if existing is not None:
        return {"claim_id": claim_id, "claim_stage": existing["claim_stage"]}
    ctx.db.insert(
        CLAIMS,
        {
            "id": claim_id,
            "policy_id": args.policy_id,
            "vehicle_id": args.vehicle_id,
            "vehicle_vin": args.vehicle_vin,
            "driver_id": args.driver_id,
            "date_of_loss": args.date_of_loss,
            "loss_location": args.loss_location,
            "claim_type": args.claim_type,
            "claim_stage": INITIAL_STAGE,
            "severity": args.severity,
            "siu_flag": args.siu_flag or "None",
            "unlisted_driver_flag": bool(args.unlisted_driver_flag),
            "has_bodily_injury": bool(args.has_bodily_injury),
            "police_report_required": bool(args.police_report_required),
            "police_report_number": args.police_report_number,
            "other_party_name": args.other_party_name,
            "other_party_phone": args.other_party_phone,
            "other_party_insurance": args.other_party_insurance,
            "created_date": args.date_of_loss,
        },
    )
    return {"claim_id": claim_id, "claim_stage": INITIAL_STAGE}


@tool(
    "claims_get_driver_claims",
    DriverClaimsInput,
    "List the claims in which a driver was involved; optionally only open ones.",
)
def get_driver_claims(ctx: ToolContext, args: DriverClaimsInput) -> dict[str, Any]:
    return _claims_involving(ctx, DRIVERS, "Driver", "driver_id", args.driver_id, args.open_only)


def _claims_involving(
    ctx: ToolContext, table: str, label: str, field: str, ident: str, open_only: bool | None
) -> dict[str, Any]:
    """The claims whose `field` is `ident` (a driver or a vehicle that must
    exist), optionally only open ones."""
    ctx.db.require(table, ident, f"{label} '{ident}' not found.")
    claims = [c for c in ctx.db.find(CLAIMS, **{field: ident}) if not open_only or _is_open(c)]
    return {"claims": [_item(c) for c in claims], "has_open_claims": any(_is_open(c) for c in claims)}


def _cutoff(ctx: ToolContext, months_back: int) -> str:
    """The oldest created_date kept: the newest created_date of the whole claims
    table (not today's date) minus 30 days per month."""
    dates = [c["created_date"] for c in ctx.db.all(CLAIMS)]
    reference = max(dates) if dates else _NO_CLAIMS_REFERENCE
    try:
        day = dt.datetime.strptime(reference, "%Y-%m-%d")
        return (day - dt.timedelta(days=30 * months_back)).strftime("%Y-%m-%d")
    except (ValueError, OverflowError) as exc:
        raise ToolError(str(exc)) from exc


@tool(
    "claims_get_policy_claims",
    PolicyClaimsInput,
    "List a policy's claims, optionally only those created in the last N months.",
)
def get_policy_claims(ctx: ToolContext, args: PolicyClaimsInput) -> dict[str, Any]:
    _require_policy(ctx, args.policy_id)
    claims = ctx.db.find(CLAIMS, policy_id=args.policy_id)
    if args.months_back:
        cutoff = _cutoff(ctx, args.months_back)
        claims = [c for c in claims if c["created_date"] >= cutoff]
    return {"claims": [_item(c) for c in claims], "total_count": len(claims)}


@tool(
    "claims_get_vehicle_claims",
    VehicleClaimsInput,
    "List the claims filed for a vehicle; optionally only open ones.",
)
def get_vehicle_claims(ctx: ToolContext, args: VehicleClaimsInput) -> dict[str, Any]:
    return _claims_involving(ctx, VEHICLES, "Vehicle", "vehicle_id", args.vehicle_id, args.open_only)


TOOLS = (check_open_major_claims, create_fnol, get_driver_claims, get_policy_claims, get_vehicle_claims)
