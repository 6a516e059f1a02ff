"""Pieces shared by the auto-insurance toolsets: table names and the
content-hash id helper (the lax input base and null omission live in
`servers.engine.helpers`)."""

from __future__ import annotations

import hashlib

CUSTOMERS = "crm_customers"
POLICIES = "policy_policies"
VEHICLES = "policy_vehicles"
DRIVERS = "policy_drivers"
DOCUMENTS = "policy_policy_documents"
BILLING = "billing_billing_accounts"
CLAIMS = "claims_claims"


def hash_prefix(text: str, digits: int) -> str:
    """The first `digits` hex digits (upper-case) of SHA-256 over `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits].upper()
