"""Billing toolset: account look-up and payment arrangements. Every tool finds
the account as the first one (storage order) carrying the given policy id."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.auto_insurance.common import BILLING
from servers.engine.helpers import LaxInput
from servers.engine.tools import ToolContext, tool

_POLICY_DOC = "The policy whose billing account is meant."


class PolicyBillingInput(LaxInput):
    policy_id: str = Field(description=_POLICY_DOC)


class InstallmentPlanInput(LaxInput):
    policy_id: str = Field(description=_POLICY_DOC)
    installment_count: int = Field(description="How many installments the balance is split into.")
    installment_amount: int = Field(description="The amount of each installment, in cents.")


class GrantExtensionInput(LaxInput):
    policy_id: str = Field(description=_POLICY_DOC)
    new_due_date: str = Field(description="The extended due date (YYYY-MM-DD).")


def _account(ctx: ToolContext, policy_id: str) -> dict[str, Any]:
    row = ctx.db.require_first(
        BILLING, f"No billing account found for policy_id '{policy_id}'.", policy_id=policy_id
    )
    return row


def _new_arrangement(ctx: ToolContext, policy_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply a payment arrangement to the policy's billing account; it counts
    as one more arrangement in the last 12 months."""
    acct = _account(ctx, policy_id)
    count = acct["arrangements_12_months"] + 1
    ctx.db.update(BILLING, acct["id"], {**changes, "arrangements_12_months": count})
    return {"billing_account_id": acct["id"], "arrangements_12_months": count}


@tool(
    "billing_create_installment_plan",
    InstallmentPlanInput,
    "Put a billing account on an installment plan (count and amount per installment); counts as one "
    "arrangement in the last 12 months.",
)
def create_installment_plan(ctx: ToolContext, args: InstallmentPlanInput) -> dict[str, Any]:
    return _new_arrangement(
        ctx,
        args.policy_id,
        {
            "arrangement_type": "Installment Plan",
            "installment_count": args.installment_count,
            "installment_amount": args.installment_amount,
        },
    )


@tool(
    "billing_get_account_details",
    PolicyBillingInput,
    "Show a policy's billing account: status, monthly payment, past-due amount, due date, whether payment "
    "was received and the current arrangement.",
)
def get_account_details(ctx: ToolContext, args: PolicyBillingInput) -> dict[str, Any]:
    acct = _account(ctx, args.policy_id)
    return {
        "billing_account_id": acct["id"],
        "policy_id": acct["policy_id"],
        "status": acct["status"],
        "monthly_payment": acct["monthly_payment"],
        "past_due_amount": acct["past_due_amount"],
        "current_due_date": acct["current_due_date"],
        "payment_received": acct["payment_received"],
        "arrangement_type": acct["arrangement_type"],
    }


@tool(
    "billing_get_arrangement_history",
    PolicyBillingInput,
    "How many payment arrangements the policy's billing account had in the last 12 months.",
)
def get_arrangement_history(ctx: ToolContext, args: PolicyBillingInput) -> dict[str, Any]:
    return {"arrangements_12_months": _account(ctx, args.policy_id)["arrangements_12_months"]}


@tool(
    "billing_grant_extension",
    GrantExtensionInput,
    "Move a billing account's due date to a later date (a payment extension); counts as one arrangement "
    "in the last 12 months.",
)
def grant_extension(ctx: ToolContext, args: GrantExtensionInput) -> dict[str, Any]:
    return _new_arrangement(
        ctx,
        args.policy_id,
        {
            "current_due_date": args.new_due_date,
            "new_due_date": args.new_due_date,
            "arrangement_type": "Extension",
            "installment_count": None,
            "installment_amount": None,
        },
    )


@tool(
    "billing_reset_account_status",
    PolicyBillingInput,
    "Bring a billing account back to Current: clears the past-due amount and any active arrangement.",
)
def reset_account_status(ctx: ToolContext, args: PolicyBillingInput) -> dict[str, Any]:
    acct = _account(ctx, args.policy_id)
    ctx.db.update(
        BILLING,
        acct["id"],
        {
            "status": "Current",
            "past_due_amount": 0,
            "arrangement_type": "None",
            "new_due_date": None,
            "installment_count": None,
            "installment_amount": None,
        },
    )
    return {"billing_account_id": acct["id"], "status": "Current"}


TOOLS = (
    create_installment_plan,
    get_account_details,
    get_arrangement_history,
    grant_extension,
    reset_account_status,
)
