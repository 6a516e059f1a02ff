"""Warranty contracts and claims."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.retail.common import CLAIMS, CONTRACTS, WRITE_TS, as_utc, drop_nulls
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolInput, tool

ISSUE_DESCRIPTIONS = {
    "product_not_functioning": "Product not functioning properly",
    "component_failed": "Component failed",
    "performance_degradation": "Performance degradation",
    "accidental_damage": "Accidental damage",
}


class CheckWarrantyCoverageInput(ToolInput):
    order_id: str = Field(description="Order the item was bought on.")
    sku: str = Field(description="SKU of the item.")


@tool(
    "check_warranty_coverage",
    CheckWarrantyCoverageInput,
    "Tell whether an item from an order is covered today by a warranty contract, and if so which "
    "contract, its type, validity period and what it covers.",
    catch_all="Failed to check warranty coverage",
)
def check_warranty_coverage(ctx: ToolContext, args: CheckWarrantyCoverageInput) -> dict[str, Any]:
    now = ctx.now
    for contract in ctx.db.find(CONTRACTS, order_id=args.order_id, sku=args.sku):
        if as_utc(contract["start_date"]) <= now <= as_utc(contract["end_date"]):
            return drop_nulls(
                {
                    "has_coverage": True,
                    "contract_id": contract["id"],
                    "warranty_type": contract["warranty_type"],
                    "start_date": out_dt(contract["start_date"]),
                    "end_date": out_dt(contract["end_date"]),
                    "coverage_details": contract["coverage_details"],
                }
            )
    return {"has_coverage": False}


class FileWarrantyClaimInput(ToolInput):
    contract_id: str = Field(description="Warranty contract to claim against.")
    customer_id: str = Field(description="Customer filing the claim.")
    warranty_issue_type: Literal[
        "product_not_functioning", "component_failed", "performance_degradation", "accidental_damage"
    ] = Field(description="Kind of problem with the product.")


@tool(
    "file_warranty_claim",
    FileWarrantyClaimInput,
    "Open a warranty claim on an existing contract. The claim starts out pending review.",
    catch_all="Failed to file warranty claim",
)
def file_warranty_claim(ctx: ToolContext, args: FileWarrantyClaimInput) -> dict[str, Any]:
    ctx.db.require_first(CONTRACTS, f"Warranty contract not found: {args.contract_id}", id=args.contract_id)
    claim_id = ctx.db.first_free_id(CLAIMS, "WCL-2%07d", ctx.db.count(CLAIMS))
    ctx.db.insert(
        CLAIMS,
        {
            "id": claim_id,
            "contract_id": args.contract_id,
            "customer_id": args.customer_id,
            "claim_date": WRITE_TS,
            "issue_description": ISSUE_DESCRIPTIONS[args.warranty_issue_type],
            "status": "pending",
            "resolution": None,
        },
    )
    return {"claim_id": claim_id, "status": "pending", "claim_date": out_dt(WRITE_TS)}


TOOLS = (check_warranty_coverage, file_warranty_claim)
