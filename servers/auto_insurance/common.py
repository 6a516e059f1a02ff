"""Pieces shared by the auto-insurance toolsets: the lax input base, table
names and the content-hash id helper."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict

CUSTOMERS = "crm_customers"
POLICIES = "policy_policies"
VEHICLES = "policy_vehicles"
DRIVERS = "policy_drivers"
DOCUMENTS = "policy_policy_documents"
BILLING = "billing_billing_accounts"
CLAIMS = "claims_claims"


class AutoInput(BaseModel):
    """Input base of this domain's own tools: unknown parameters are ignored
    (only the policy-search tool rejects them)."""

    model_config = ConfigDict(extra="ignore")


def hash_prefix(text: str, digits: int) -> str:
    """The first `digits` hex digits (upper-case) of SHA-256 over `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits].upper()


def without_nulls(payload: dict[str, Any]) -> dict[str, Any]:
    """Drop top-level keys whose value is null (the output models omit them)."""
    return {k: v for k, v in payload.items() if v is not None}
