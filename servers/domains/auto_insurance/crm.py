"""CRM toolset: customer look-up and identity verification (read-only)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.auto_insurance.common import CUSTOMERS
from servers.engine.helpers import LaxInput, drop_nulls
from servers.engine.tools import ToolContext, ToolError, tool


class CustomerByEmailInput(LaxInput):
    email: str = Field(description="The customer's e-mail address (matched case-insensitively).")


class CustomerProfileInput(LaxInput):
    customer_id: str = Field(description="The customer's id.")


class VerifyIdentityInput(LaxInput):
    customer_id: str = Field(description="The customer to verify.")
    ssn_last_4: str | None = Field(default=None, description="Last four SSN digits given by the caller.")
    security_answer: str | None = Field(
        default=None, description="The caller's answer to the security question."
    )


def _customer(ctx: ToolContext, customer_id: str) -> dict[str, Any]:
    row = ctx.db.require(CUSTOMERS, customer_id, f"Customer with ID '{customer_id}' not found")
    return row


@tool(
    "crm_get_customer_by_email",
    CustomerByEmailInput,
    "Find a customer by e-mail address; returns the customer id and name.",
)
def get_customer_by_email(ctx: ToolContext, args: CustomerByEmailInput) -> dict[str, Any]:
    wanted = args.email.lower()
    for row in ctx.db.all(CUSTOMERS):
        if row["email"].lower() == wanted:
            return {"customer_id": row["id"], "first_name": row["first_name"], "last_name": row["last_name"]}
    raise ToolError(f"No customer found with email '{args.email}'")


@tool(
    "crm_get_customer_profile",
    CustomerProfileInput,
    "Show a customer's profile: contact details, birth date, tier, fraud flag, security question and whether "
    "an SSN is on file (secrets are never shown).",
)
def get_customer_profile(ctx: ToolContext, args: CustomerProfileInput) -> dict[str, Any]:
    row = _customer(ctx, args.customer_id)
    return drop_nulls(
        {
            "customer_id": row["id"],
            "email": row["email"],
            "first_name": row["first_name"],
            "last_name": row["last_name"],
            "date_of_birth": row["date_of_birth"],
            "phone": row["phone"],
            "tier": row["tier"],
            "fraud_flag": row["fraud_flag"],
            "security_question": row["security_question"],
            "has_ssn_on_file": row["ssn_last_4"] is not None,
        }
    )


@tool(
    "crm_verify_identity",
    VerifyIdentityInput,
    "Check a caller's identity against the customer record, by SSN last four (preferred when given) or by "
    "the security answer.",
)
def verify_identity(ctx: ToolContext, args: VerifyIdentityInput) -> dict[str, Any]:
    if not args.ssn_last_4 and not args.security_answer:
        raise ToolError("Must provide either ssn_last_4 or security_answer for verification")
    row = _customer(ctx, args.customer_id)
    if args.ssn_last_4:
        stored = row["ssn_last_4"]
        return {"verified": stored is not None and stored == args.ssn_last_4, "verification_method": "ssn"}
    answer = row["security_answer"]
    verified = answer is not None and answer.lower() == (args.security_answer or "").lower()
    return {"verified": verified, "verification_method": "security_question"}


TOOLS = (get_customer_by_email, get_customer_profile, verify_identity)
