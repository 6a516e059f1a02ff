"""Auto-insurance domain tools (policy, billing, claims, CRM, lookup, policy
search): exact reply texts, state changes, error cases and the quirks of
spec/auto-insurance.md §5.2, run against a throwaway database on the host
PostgreSQL (TBX_TEST_PG_DSN, default the local test server on /tmp:55432)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import DomainTools, domain_seed, err, reload

from servers.domains.auto_insurance.domain import DOMAIN
from servers.engine.seeding import DataPatchError, initial_rows
from servers.engine.store import Store

# ---- helpers (the `db` fixture is conftest's: the seeded database, rolled back) ---
T = DomainTools(DOMAIN)
call, rows = T.call, T.rows


def ok(conn: psycopg.Connection[Any], tool: str, **params: Any) -> Any:
    reply = json.loads(call(conn, tool, **params))
    assert "error" not in reply, reply
    return reply


def row(conn: psycopg.Connection[Any], table: str, key: str) -> dict[str, Any]:
    found = Store(conn, DOMAIN.tables).get(table, key)
    assert found is not None, f"{table} {key} missing"
    return found


POLICY = {
    "id": "POL-3847291856",
    "customer_id": "CUST-847291",
    "state": "CA",
    "effective_date": "2024-10-01",
    "expiration_date": "2025-10-01",
    "renewal_date": "2025-10-01",
    "named_insured_id": "CUST-847291",
}


# ---- listing -------------------------------------------------------------------
def test_listing_order_and_policy_tool(dataset: Path) -> None:
    ref = json.loads((dataset / "servers" / DOMAIN.module / "tools.json").read_text())["agent_tools"]
    own = [t.name for t in DOMAIN.tools if not t.name.startswith("zendesk_")]
    assert own == [t["name"] for t in ref if not t["name"].startswith("zendesk_")]
    assert DOMAIN.policy_tool == "knowledge_base_search_policy" == DOMAIN.tools[-1].name


# ---- CRM -----------------------------------------------------------------------
def test_get_customer_by_email_case_insensitive_first_match(db: psycopg.Connection[Any]) -> None:
    assert call(db, "crm_get_customer_by_email", email="Robert.CHEN@outlook.com") == (
        '{"customer_id": "CUS-00012345", "first_name": "Robert", "last_name": "Chen"}'
    )
    # A patched customer with the same address comes after the seed row: the seed row wins.
    reload(db, DOMAIN, {"crm_customers": [{"id": "CUST-1", "email": "ROBERT.chen@outlook.com", "first_name": "R",
                                   "last_name": "C", "date_of_birth": "1990-01-01"}]})  # fmt: skip
    assert (
        ok(db, "crm_get_customer_by_email", email="robert.chen@outlook.com")["customer_id"] == "CUS-00012345"
    )
    assert call(db, "crm_get_customer_by_email", email=" robert.chen@outlook.com") == err(
        "crm_get_customer_by_email", "No customer found with email ' robert.chen@outlook.com'"
    )


def test_get_customer_profile_omits_nulls_and_secrets(db: psycopg.Connection[Any]) -> None:
    assert call(db, "crm_get_customer_profile", customer_id="CUS-00012345") == (
        '{"customer_id": "CUS-00012345", "email": "robert.chen@outlook.com", "first_name": "Robert", '
        '"last_name": "Chen", "date_of_birth": "1985-03-15", "phone": "310-555-0101", "tier": "Standard", '
        '"fraud_flag": false, "security_question": "What is your pet\'s name?", "has_ssn_on_file": true}'
    )
    # phone and security_question null -> omitted; an empty SSN still counts as on file.
    reload(db, DOMAIN, {"crm_customers": [{"id": "CUS-00056789", "email": "j@t.com", "first_name": "James",
                                   "last_name": "T", "date_of_birth": "1982-05-18", "ssn_last_4": ""}]})  # fmt: skip
    assert call(db, "crm_get_customer_profile", customer_id="CUS-00056789") == (
        '{"customer_id": "CUS-00056789", "email": "j@t.com", "first_name": "James", "last_name": "T", '
        '"date_of_birth": "1982-05-18", "tier": "Standard", "fraud_flag": false, "has_ssn_on_file": true}'
    )
    assert call(db, "crm_get_customer_profile", customer_id="cus-00012345") == err(
        "crm_get_customer_profile", "Customer with ID 'cus-00012345' not found"
    )


def test_verify_identity_ssn_precedence_and_missing_inputs(db: psycopg.Connection[Any]) -> None:
    # Quirk 15: a non-empty SSN decides alone, even with a correct security answer.
    assert call(db, "crm_verify_identity", customer_id="CUS-00012345", ssn_last_4="0000",
                security_answer="Fluffy") == '{"verified": false, "verification_method": "ssn"}'  # fmt: skip
    assert ok(db, "crm_verify_identity", customer_id="CUS-00012345", ssn_last_4="1234") == {
        "verified": True,
        "verification_method": "ssn",
    }
    # Empty SSN counts as missing -> security answer, compared case-insensitively, untrimmed.
    assert call(
        db, "crm_verify_identity", customer_id="CUS-00012345", ssn_last_4="", security_answer="fLUFFY"
    ) == ('{"verified": true, "verification_method": "security_question"}')
    assert (
        ok(db, "crm_verify_identity", customer_id="CUS-00012345", security_answer="Fluffy ")["verified"]
        is False
    )
    # Stored answer null -> never verified.
    assert ok(db, "crm_verify_identity", customer_id="CUS-00056789", security_answer="x")["verified"] is False
    missing = err("crm_verify_identity", "Must provide either ssn_last_4 or security_answer for verification")
    # Checked before the customer look-up.
    assert call(db, "crm_verify_identity", customer_id="NOPE", ssn_last_4="", security_answer=None) == missing
    assert call(db, "crm_verify_identity", customer_id="NOPE", ssn_last_4="1") == err(
        "crm_verify_identity", "Customer with ID 'NOPE' not found"
    )


# ---- policy --------------------------------------------------------------------
def test_get_policy_details_omits_nulls(db: psycopg.Connection[Any]) -> None:
    assert call(db, "policy_get_policy_details", policy_id="POL-0022222222") == (
        '{"policy_id": "POL-0022222222", "customer_id": "CUS-00022222", "status": "Pending Cancellation", '
        '"state": "FL", "effective_date": "2023-09-01", "expiration_date": "2024-09-01", "renewal_date": '
        '"2024-09-01", "cancellation_date": "2024-12-31", "cancellation_reason": "User Requested", '
        '"named_insured_id": "CUS-00022222", "automatic_extension_days": 14, "at_fault_claims_3_years": 2, '
        '"lapse_flag": false}'
    )
    assert "lapse_start" not in ok(db, "policy_get_policy_details", policy_id="POL-0033333333")
    assert call(db, "policy_get_policy_details", policy_id="POL-1") == err(
        "policy_get_policy_details", "Policy with ID 'POL-1' not found"
    )
    assert call(db, "policy_get_policy_details") == err(
        "policy_get_policy_details", "Input validation failed: policy_id: Field required"
    )


def test_policy_vehicle_and_driver_lists(db: psycopg.Connection[Any]) -> None:
    db_store = Store(db, DOMAIN.tables)
    db_store.update("policy_vehicles", "VEH-00012346", {"status": "Removed"})
    db_store.update("policy_drivers", "DRV-00012346", {"status": "Excluded"})
    assert call(db, "policy_get_policy_vehicles", policy_id="POL-0012345678", active_only=True) == (
        '{"vehicles": [{"id": "VEH-00012345", "vin": "1HGCM82633A123456", "year": 2022, "make": "Honda", '
        '"model": "Accord", "status": "Active", "effective_date": "2024-01-01"}], "vehicle_count": 1}'
    )
    assert (
        ok(db, "policy_get_policy_vehicles", policy_id="POL-0012345678", active_only=None)["vehicle_count"]
        == 2
    )
    assert call(db, "policy_get_policy_drivers", policy_id="POL-0012345678", active_only=True) == (
        '{"drivers": [{"id": "DRV-00012345", "name": "John Smith", "date_of_birth": "1985-03-15", "status": '
        '"Rated", "effective_date": "2024-01-01", "is_named_insured": true, "is_co_insured": false}, '
        '{"id": "DRV-00012346", "name": "Sarah Smith", "date_of_birth": "1987-07-22", "status": "Excluded", '
        '"effective_date": "2024-01-01", "is_named_insured": false, "is_co_insured": true}], "driver_count": 2}'
    )
    assert ok(db, "policy_get_policy_drivers", policy_id="POL-0033333333") == {
        "drivers": [],
        "driver_count": 0,
    }
    assert call(db, "policy_get_policy_vehicles", policy_id="X") == err(
        "policy_get_policy_vehicles", "Policy with ID 'X' not found"
    )
    assert call(db, "policy_get_policy_drivers", policy_id="X") == err(
        "policy_get_policy_drivers", "Policy with ID 'X' not found"
    )


def test_get_vehicle_details(db: psycopg.Connection[Any]) -> None:
    assert call(db, "policy_get_vehicle_details", vehicle_id="VEH-00033333") == (
        '{"vehicle_id": "VEH-00033333", "policy_id": "POL-0033333333", "vin": "3VWCX7AJ9FM654789", "year": 2019, '
        '"make": "Volkswagen", "model": "Jetta", "status": "Active", "effective_date": "2024-06-01", '
        '"date_added_to_policy": "2024-06-01", "collision_coverage": true, "comprehensive_coverage": false, '
        '"rental_coverage": false, "uw_pending": false}'
    )
    assert call(db, "policy_get_vehicle_details", vehicle_id="VEH-1") == err(
        "policy_get_vehicle_details", "Vehicle with ID 'VEH-1' not found"
    )


def test_add_vehicle_hash_id_copy_and_duplicates(db: psycopg.Connection[Any]) -> None:
    reload(db, DOMAIN, {"policy_policies": [{**POLICY, "id": "POL-3195137928"}]})
    args = {"policy_id": "POL-3195137928", "vin": "5J6RS6H94RL322376", "year": "2024", "make": "Honda",
            "model": "CR-V", "effective_date": "2025-09-26"}  # fmt: skip
    assert call(db, "policy_add_vehicle", **args) == '{"vehicle_id": "VEH-2-E80D6850"}'
    assert rows(db, "policy_vehicles")[-1] == {
        "id": "VEH-2-E80D6850", "policy_id": "POL-3195137928", "vin": "5J6RS6H94RL322376", "year": 2024,
        "make": "Honda", "model": "CR-V", "status": "Active", "effective_date": "2025-09-26",
        "removal_date": None, "date_added_to_policy": "2025-09-26", "collision_coverage": True,
        "comprehensive_coverage": True, "rental_coverage": False, "uw_pending": False,
    }  # fmt: skip
    # The same VIN again (whatever its status) is refused before the id is considered.
    Store(db, DOMAIN.tables).update("policy_vehicles", "VEH-2-E80D6850", {"status": "Removed"})
    assert call(db, "policy_add_vehicle", **args) == err(
        "policy_add_vehicle", "VIN '5J6RS6H94RL322376' already exists on this policy"
    )
    # The VIN check is case-sensitive; an id already present (from patched data) is returned untouched.
    reload(db, DOMAIN, {"policy_policies": [{**POLICY, "id": "POL-3195137928"}],
               "policy_vehicles": [{"id": "VEH-2-E80D6850", "policy_id": "POL-3195137928",
                                    "vin": "5j6rs6h94rl322376", "year": 1, "make": "m", "model": "m",
                                    "effective_date": "d", "date_added_to_policy": "d"}]})  # fmt: skip
    assert call(db, "policy_add_vehicle", **args) == '{"vehicle_id": "VEH-2-E80D6850"}'
    assert row(db, "policy_vehicles", "VEH-2-E80D6850")["vin"] == "5j6rs6h94rl322376"
    assert len(rows(db, "policy_vehicles")) == 6
    assert call(db, "policy_add_vehicle", **{**args, "policy_id": "POL-9"}) == err(
        "policy_add_vehicle", "Policy with ID 'POL-9' not found"
    )
    assert call(db, "policy_add_vehicle", **{**args, "year": 2024.5}) == err(
        "policy_add_vehicle",
        "Input validation failed: year: Input should be a valid integer, got a number with a fractional part",
    )


def test_add_driver_hash_id_defaults_and_duplicates(db: psycopg.Connection[Any]) -> None:
    reload(db, DOMAIN, {"policy_policies": [{**POLICY, "id": "POL-1000000001"}]})
    args = {"policy_id": "POL-1000000001", "name": "Ethan Ramirez", "date_of_birth": "2006-03-11",
            "relationship": "Child", "status": "Excluded", "effective_date": "2025-10-01",
            "uw_pending": None, "exclusion_form_required": "yes"}  # fmt: skip
    assert call(db, "policy_add_driver", **args) == '{"driver_id": "DRV-2-F5970EE7", "status": "Excluded"}'
    assert row(db, "policy_drivers", "DRV-2-F5970EE7") == {
        "id": "DRV-2-F5970EE7", "policy_id": "POL-1000000001", "customer_id": None, "name": "Ethan Ramirez",
        "date_of_birth": "2006-03-11", "license_number": None, "license_state": None, "relationship": "Child",
        "status": "Excluded", "effective_date": "2025-10-01", "removal_date": None, "is_named_insured": False,
        "is_co_insured": False, "uw_pending": False, "exclusion_form_required": True,
    }  # fmt: skip
    assert call(db, "policy_add_driver", **args) == err(
        "policy_add_driver",
        "Driver with name 'Ethan Ramirez' and DOB '2006-03-11' already exists on this policy",
    )
    assert call(db, "policy_add_driver", **{**args, "status": "Active"}) == err(
        "policy_add_driver",
        "Input validation failed: status: Input should be 'Rated', 'Excluded' or 'Removed'",
    )
    assert call(db, "policy_add_driver", **{**args, "policy_id": "P"}) == err(
        "policy_add_driver", "Policy with ID 'P' not found"
    )
    # An id that already exists elsewhere is answered with its stored status, nothing written.
    reload(db, DOMAIN, {"policy_policies": [{**POLICY, "id": "POL-1000000001"}],
               "policy_drivers": [{"id": "DRV-2-F5970EE7", "policy_id": "X", "name": "n", "date_of_birth": "d",
                                   "relationship": "r", "status": "Removed", "effective_date": "e"}]})  # fmt: skip
    assert call(db, "policy_add_driver", **args) == '{"driver_id": "DRV-2-F5970EE7", "status": "Removed"}'
    assert row(db, "policy_drivers", "DRV-2-F5970EE7")["policy_id"] == "X"


def test_update_vehicle_status_keeps_effective_date(db: psycopg.Connection[Any]) -> None:
    # Quirk 7 (vehicle half): effective_date untouched, removal_date never cleared.
    assert call(db, "policy_update_vehicle_status", vehicle_id="VEH-00012345", new_status="Removed",
                effective_date="2025-10-01") == '{"vehicle_id": "VEH-00012345", "status": "Removed"}'  # fmt: skip
    v = row(db, "policy_vehicles", "VEH-00012345")
    assert (v["status"], v["effective_date"], v["removal_date"]) == ("Removed", "2024-01-01", "2025-10-01")
    ok(
        db,
        "policy_update_vehicle_status",
        vehicle_id="VEH-00012345",
        new_status="Active",
        effective_date="2025-11-01",
    )
    v = row(db, "policy_vehicles", "VEH-00012345")
    assert (v["status"], v["effective_date"], v["removal_date"]) == ("Active", "2024-01-01", "2025-10-01")
    assert call(
        db, "policy_update_vehicle_status", vehicle_id="V", new_status="Removed", effective_date="d"
    ) == err("policy_update_vehicle_status", "Vehicle with ID 'V' not found")
    assert call(
        db, "policy_update_vehicle_status", vehicle_id="V", new_status="Excluded", effective_date="d"
    ) == (
        err(
            "policy_update_vehicle_status",
            "Input validation failed: new_status: Input should be 'Active' or 'Removed'",
        )
    )


def test_update_driver_status_overwrites_effective_date(db: psycopg.Connection[Any]) -> None:
    # Quirk 7 (driver half): effective_date always overwritten, removal_date never cleared.
    assert call(db, "policy_update_driver_status", driver_id="DRV-00012346", new_status="Removed",
                effective_date="2025-10-01") == '{"driver_id": "DRV-00012346", "status": "Removed"}'  # fmt: skip
    d = row(db, "policy_drivers", "DRV-00012346")
    assert (d["status"], d["effective_date"], d["removal_date"]) == ("Removed", "2025-10-01", "2025-10-01")
    ok(
        db,
        "policy_update_driver_status",
        driver_id="DRV-00012346",
        new_status="Rated",
        effective_date="2025-12-01",
    )
    d = row(db, "policy_drivers", "DRV-00012346")
    assert (d["status"], d["effective_date"], d["removal_date"]) == ("Rated", "2025-12-01", "2025-10-01")
    assert call(
        db, "policy_update_driver_status", driver_id="D", new_status="Rated", effective_date="x"
    ) == err("policy_update_driver_status", "Driver with ID 'D' not found")


def test_schedule_cancellation(db: psycopg.Connection[Any]) -> None:
    assert call(db, "policy_schedule_cancellation", policy_id="POL-0012345678", cancellation_date="not a date",
                cancellation_reason="Fraud") == (
        '{"policy_id": "POL-0012345678", "status": "Pending Cancellation"}'
    )  # fmt: skip
    p = row(db, "policy_policies", "POL-0012345678")
    assert (p["status"], p["cancellation_date"], p["cancellation_reason"]) == (
        "Pending Cancellation", "not a date", "Fraud"
    )  # fmt: skip
    assert call(db, "policy_schedule_cancellation", policy_id="P", cancellation_date="d",
                cancellation_reason="Fraud") == err(
        "policy_schedule_cancellation", "Policy with ID 'P' not found"
    )  # fmt: skip
    assert call(db, "policy_schedule_cancellation", policy_id="P", cancellation_date="d",
                cancellation_reason="fraud") == err(
        "policy_schedule_cancellation",
        "Input validation failed: cancellation_reason: Input should be 'User Requested', 'Non-Payment', "
        "'Underwriting' or 'Fraud'",
    )  # fmt: skip


def test_reinstate_policy_lapse_fields(db: psycopg.Connection[Any]) -> None:
    # Quirk 8: lapse_flag false keeps lapse_start/end; true overwrites them, with nulls if not given.
    assert call(db, "policy_reinstate_policy", policy_id="POL-0022222222", lapse_flag=False) == (
        '{"policy_id": "POL-0022222222", "status": "Active", "lapse_flag": false}'
    )
    p = row(db, "policy_policies", "POL-0022222222")
    assert (p["status"], p["cancellation_date"], p["cancellation_reason"]) == ("Active", None, None)
    ok(db, "policy_reinstate_policy", policy_id="POL-0033333333", lapse_flag="false")
    p = row(db, "policy_policies", "POL-0033333333")
    assert (p["lapse_flag"], p["lapse_start"], p["lapse_end"]) == (False, "2024-03-01", "2024-05-15")
    ok(db, "policy_reinstate_policy", policy_id="POL-0033333333", lapse_flag=True, lapse_start="2025-09-06")
    p = row(db, "policy_policies", "POL-0033333333")
    assert (p["lapse_flag"], p["lapse_start"], p["lapse_end"]) == (True, "2025-09-06", None)
    assert call(db, "policy_reinstate_policy", policy_id="P", lapse_flag=True) == err(
        "policy_reinstate_policy", "Policy with ID 'P' not found"
    )
    assert call(db, "policy_reinstate_policy", policy_id="P") == err(
        "policy_reinstate_policy", "Input validation failed: lapse_flag: Field required"
    )


def test_generate_document_link_member_name_id_and_reuse(db: psycopg.Connection[Any]) -> None:
    # Quirk 1: the id hashes "DocumentType.PROOF_OF_INSURANCE", the URL uses the value.
    reload(db, DOMAIN, {"policy_policies": [{**POLICY, "id": "POL-4729183856"}]})
    args = {"policy_id": "POL-4729183856", "document_type": "proof_of_insurance", "ticket_id": "7",
            "expiration_date": "2025-10-02T13:00:05Z"}  # fmt: skip
    reply = (
        '{"document_id": "DOC-2-643FA446", "url": '
        '"https://portal.horizonshield.com/docs/secure/POL-4729183856_proof_of_insurance_7", '
        '"expires_at": "2025-10-02T13:00:05Z"}'
    )
    assert call(db, "policy_generate_document_link", **args) == reply
    # Quirk 6: created_at and expires_at both copy the argument verbatim.
    assert row(db, "policy_policy_documents", "DOC-2-643FA446") == {
        "id": "DOC-2-643FA446", "policy_id": "POL-4729183856", "ticket_id": "7",
        "document_type": "proof_of_insurance",
        "url": "https://portal.horizonshield.com/docs/secure/POL-4729183856_proof_of_insurance_7",
        "created_at": "2025-10-02T13:00:05Z", "expires_at": "2025-10-02T13:00:05Z",
    }  # fmt: skip
    # Same policy/type/ticket again: the stored link comes back, the new expiry is ignored.
    assert call(db, "policy_generate_document_link", **{**args, "expiration_date": "2026-01-01"}) == reply
    assert len(rows(db, "policy_policy_documents")) == 6
    ok(
        db,
        "policy_generate_document_link",
        **{**args, "document_type": "id_card", "expiration_date": "20251002"},
    )
    assert rows(db, "policy_policy_documents")[-1]["created_at"] == "20251002"
    assert call(db, "policy_generate_document_link", **{**args, "expiration_date": "2025-10"}) == err(
        "policy_generate_document_link",
        "Invalid expiration_date format: '2025-10'. Expected ISO 8601 format (e.g., '2024-01-16T10:05:00Z')",
    )
    assert call(db, "policy_generate_document_link", **{**args, "policy_id": "P"}) == err(
        "policy_generate_document_link", "Policy with ID 'P' not found"
    )


# ---- billing -------------------------------------------------------------------
ACCOUNT = {"id": "BILL-9", "policy_id": "POL-0012345678", "customer_id": "C", "monthly_payment": 1,
           "current_due_date": "2025-09-01"}  # fmt: skip


def test_billing_reads_use_first_account_in_storage_order(db: psycopg.Connection[Any]) -> None:
    # Quirk 10: a patched account with the same policy id comes after the seed account.
    reload(db, DOMAIN, {"billing_billing_accounts": [ACCOUNT]})
    assert call(db, "billing_get_account_details", policy_id="POL-0012345678") == (
        '{"billing_account_id": "BILL-000001", "policy_id": "POL-0012345678", "status": "Past Due", '
        '"monthly_payment": 25000, "past_due_amount": 30000, "current_due_date": "2025-01-15", '
        '"payment_received": false, "arrangement_type": "None"}'
    )
    assert call(db, "billing_get_arrangement_history", policy_id="POL-0099001122") == (
        '{"arrangements_12_months": 2}'
    )
    for name in (
        "billing_get_account_details",
        "billing_get_arrangement_history",
        "billing_reset_account_status",
    ):
        assert call(db, name, policy_id="POL-X") == err(
            name, "No billing account found for policy_id 'POL-X'."
        )


def test_grant_extension(db: psycopg.Connection[Any]) -> None:
    # Quirk 9: both due dates written, installment fields cleared, counter incremented, status kept.
    assert call(db, "billing_grant_extension", policy_id="POL-0099001122", new_due_date="2025-10-11") == (
        '{"billing_account_id": "BILL-000003", "arrangements_12_months": 3}'
    )
    a = row(db, "billing_billing_accounts", "BILL-000003")
    assert {k: a[k] for k in ("status", "current_due_date", "new_due_date", "arrangement_type",
                              "installment_count", "installment_amount", "past_due_amount")} == {
        "status": "In Grace Period", "current_due_date": "2025-10-11", "new_due_date": "2025-10-11",
        "arrangement_type": "Extension", "installment_count": None, "installment_amount": None,
        "past_due_amount": 64000,
    }  # fmt: skip
    assert call(db, "billing_grant_extension", policy_id="P", new_due_date="d") == err(
        "billing_grant_extension", "No billing account found for policy_id 'P'."
    )


def test_installment_plan_keeps_due_dates(db: psycopg.Connection[Any]) -> None:
    assert call(db, "billing_create_installment_plan", policy_id="POL-0055667788", installment_count="3",
                installment_amount=7000) == (
        '{"billing_account_id": "BILL-000004", "arrangements_12_months": 2}'
    )  # fmt: skip
    a = row(db, "billing_billing_accounts", "BILL-000004")
    assert (a["arrangement_type"], a["installment_count"], a["installment_amount"]) == (
        "Installment Plan",
        3,
        7000,
    )
    assert (a["current_due_date"], a["new_due_date"], a["status"]) == ("2025-01-10", "2025-01-25", "Past Due")
    assert call(
        db, "billing_create_installment_plan", policy_id="P", installment_count=2, installment_amount=1
    ) == (err("billing_create_installment_plan", "No billing account found for policy_id 'P'."))
    assert call(db, "billing_create_installment_plan", policy_id="P", installment_count="two",
                installment_amount=1) == err(
        "billing_create_installment_plan",
        "Input validation failed: installment_count: Input should be a valid integer, unable to parse string as "
        "an integer",
    )  # fmt: skip


def test_reset_account_status_keeps_counter(db: psycopg.Connection[Any]) -> None:
    assert call(db, "billing_reset_account_status", policy_id="POL-0099001122") == (
        '{"billing_account_id": "BILL-000003", "status": "Current"}'
    )
    a = row(db, "billing_billing_accounts", "BILL-000003")
    assert {k: a[k] for k in ("status", "past_due_amount", "arrangement_type", "new_due_date", "installment_count",
                              "installment_amount", "arrangements_12_months", "current_due_date")} == {
        "status": "Current", "past_due_amount": 0, "arrangement_type": "None", "new_due_date": None,
        "installment_count": None, "installment_amount": None, "arrangements_12_months": 2,
        "current_due_date": "2024-12-28",
    }  # fmt: skip


# ---- claims --------------------------------------------------------------------
def _claim(claim_id: str, created: str, **extra: Any) -> dict[str, Any]:
    return {"id": claim_id, "policy_id": "POL-0012345678", "date_of_loss": created, "loss_location": "x",
            "claim_type": "Liability Only", "created_date": created, **extra}  # fmt: skip


def test_create_fnol_id_fallbacks_copy_and_idempotence(db: psycopg.Connection[Any]) -> None:
    # Quirk 2: CLM-2 + 9 hex digits over policy_date_vehicle (vehicle_id, else VIN, else no_vehicle).
    base = {"policy_id": "POL-0012345678", "date_of_loss": "2025-09-30", "loss_location": "LA",
            "claim_type": "Comprehensive – Theft", "severity": "Minor"}  # fmt: skip
    assert call(db, "claims_create_fnol", **base, vehicle_id="") == (
        '{"claim_id": "CLM-2D773EF1D5", "claim_stage": "Open \\u2013 Initial Review"}'
    )
    c = row(db, "claims_claims", "CLM-2D773EF1D5")
    # Quirk 6: created_date copies date_of_loss; null flags become false, null siu_flag the string "None".
    assert c == {
        "id": "CLM-2D773EF1D5", "policy_id": "POL-0012345678", "vehicle_id": "", "vehicle_vin": None,
        "driver_id": None, "date_of_loss": "2025-09-30", "loss_location": "LA",
        "claim_type": "Comprehensive – Theft", "claim_stage": "Open – Initial Review", "severity": "Minor",
        "siu_flag": "None", "unlisted_driver_flag": False, "has_bodily_injury": False,
        "police_report_required": False, "police_report_number": None, "other_party_name": None,
        "other_party_phone": None, "other_party_insurance": None, "created_date": "2025-09-30",
    }  # fmt: skip
    # A second loss without vehicle on the same day collapses into the first claim.
    Store(db, DOMAIN.tables).update("claims_claims", "CLM-2D773EF1D5", {"claim_stage": "Closed – Paid"})
    assert ok(db, "claims_create_fnol", **{**base, "severity": "Major", "claim_type": "Liability Only"}) == {
        "claim_id": "CLM-2D773EF1D5",
        "claim_stage": "Closed – Paid",
    }
    assert row(db, "claims_claims", "CLM-2D773EF1D5")["severity"] == "Minor"
    reload(db, DOMAIN, {"policy_policies": [POLICY]})
    by_id = ok(db, "claims_create_fnol", **{**base, "policy_id": "POL-3847291856"}, vehicle_id="VEH-847291-01",
               vehicle_vin="IGNORED", siu_flag="Confirmed SIU Referral", has_bodily_injury=True)  # fmt: skip
    assert by_id["claim_id"] == "CLM-2F5730F495"
    assert row(db, "claims_claims", "CLM-2F5730F495")["siu_flag"] == "Confirmed SIU Referral"
    by_vin = ok(db, "claims_create_fnol", **base, vehicle_vin="1HGCM82633A123456")["claim_id"]
    digest = hashlib.sha256(b"POL-0012345678_2025-09-30_1HGCM82633A123456").hexdigest()
    assert by_vin == "CLM-2" + digest[:9].upper()
    assert call(db, "claims_create_fnol", **{**base, "policy_id": "POL-1"}) == err(
        "claims_create_fnol", "Policy 'POL-1' not found."
    )
    assert call(db, "claims_create_fnol", **{**base, "claim_type": "Comprehensive - Theft"}).startswith(
        '{"error": "Tool execution failed: Input validation failed: claim_type: Input should be '
        "'Collision \\u2013 Single Vehicle'"
    )


def test_policy_claims_look_back_uses_newest_claim_in_table(db: psycopg.Connection[Any]) -> None:
    # Quirk 12: "today" is the newest created_date of the whole table (2024-02-10 in the seed), and a
    # month is 30 days: 9 months back -> cutoff 2023-05-16, compared as strings (>=).
    reload(db, DOMAIN, {"claims_claims": [_claim("CLM-A", "2023-05-16"), _claim("CLM-B", "2023-05-15")]})
    assert call(db, "claims_get_policy_claims", policy_id="POL-0012345678", months_back=9) == (
        '{"claims": [{"claim_id": "CLM-1000000001", "date_of_loss": "2023-05-20", "claim_type": '
        '"Collision \\u2013 Single Vehicle", "claim_stage": "Closed \\u2013 Paid", "severity": "Minor", '
        '"created_date": "2023-05-21"}, {"claim_id": "CLM-A", "date_of_loss": "2023-05-16", "claim_type": '
        '"Liability Only", "claim_stage": "Open \\u2013 Initial Review", "severity": "Moderate", '
        '"created_date": "2023-05-16"}], "total_count": 2}'
    )
    assert ok(db, "claims_get_policy_claims", policy_id="POL-0012345678", months_back=0)["total_count"] == 3
    assert ok(db, "claims_get_policy_claims", policy_id="POL-0012345678")["total_count"] == 3
    # A newer claim on another policy moves the reference: cutoff 2023-09-05.
    reload(
        db,
        DOMAIN,
        {"claims_claims": [_claim("CLM-A", "2023-05-16"), _claim("CLM-C", "2024-06-01", policy_id="P2")]},
    )
    assert ok(db, "claims_get_policy_claims", policy_id="POL-0012345678", months_back=9) == {
        "claims": [],
        "total_count": 0,
    }
    # A timestamp as the newest created_date breaks the look-back (only when months_back is set).
    reload(db, DOMAIN, {"claims_claims": [_claim("CLM-T", "2025-09-16T10:30:00Z")]})
    assert call(db, "claims_get_policy_claims", policy_id="POL-0012345678", months_back=1) == err(
        "claims_get_policy_claims", "unconverted data remains: T10:30:00Z"
    )
    assert (
        ok(db, "claims_get_policy_claims", policy_id="POL-0012345678", months_back=None)["total_count"] == 2
    )
    reload(db, DOMAIN, {"claims_claims": [_claim("CLM-Z", "Z-date")]})
    assert call(db, "claims_get_policy_claims", policy_id="POL-0012345678", months_back=1) == err(
        "claims_get_policy_claims", "time data 'Z-date' does not match format '%Y-%m-%d'"
    )
    assert call(db, "claims_get_policy_claims", policy_id="POL-X") == err(
        "claims_get_policy_claims", "Policy 'POL-X' not found."
    )


def test_vehicle_and_driver_claims_open_filter(db: psycopg.Connection[Any]) -> None:
    reload(db, DOMAIN, {"claims_claims": [
        _claim("CLM-O", "2025-01-01", vehicle_id="VEH-00012345", driver_id="DRV-00012345"),
        _claim("CLM-V", "2025-01-02", vehicle_vin="1HGCM82633A123456"),
    ]})  # fmt: skip
    got = ok(db, "claims_get_vehicle_claims", vehicle_id="VEH-00012345")
    assert [c["claim_id"] for c in got["claims"]] == ["CLM-1000000001", "CLM-O"] and got["has_open_claims"]
    # Quirk 16: the vehicle variant accepts open_only null, the driver variant rejects it.
    assert ok(db, "claims_get_vehicle_claims", vehicle_id="VEH-00012345", open_only=None)["has_open_claims"]
    assert call(db, "claims_get_driver_claims", driver_id="DRV-00012345", open_only=None) == err(
        "claims_get_driver_claims", "Input validation failed: open_only: Input should be a valid boolean"
    )
    assert call(db, "claims_get_driver_claims", driver_id="DRV-00012345", open_only=True) == (
        '{"claims": [{"claim_id": "CLM-O", "date_of_loss": "2025-01-01", "claim_type": "Liability Only", '
        '"claim_stage": "Open \\u2013 Initial Review", "severity": "Moderate", "created_date": "2025-01-01"}], '
        '"has_open_claims": true}'
    )
    assert ok(db, "claims_get_vehicle_claims", vehicle_id="VEH-00012346", open_only=True) == {
        "claims": [],
        "has_open_claims": False,
    }
    # Quirk 17: claims wording differs from the policy tools.
    assert call(db, "claims_get_vehicle_claims", vehicle_id="VEH-X") == err(
        "claims_get_vehicle_claims", "Vehicle 'VEH-X' not found."
    )
    assert call(db, "claims_get_driver_claims", driver_id="DRV-X") == err(
        "claims_get_driver_claims", "Driver 'DRV-X' not found."
    )


def test_check_open_major_claims(db: psycopg.Connection[Any]) -> None:
    reload(db, DOMAIN, {"claims_claims": [
        _claim("CLM-M1", "2025-01-01", severity="Major"),
        _claim("CLM-M2", "2025-01-02", severity="Major", claim_stage="Open – Settlement"),
        _claim("CLM-M3", "2025-01-03", severity="Major", claim_stage="Closed – Denied"),
        _claim("CLM-m", "2025-01-04", severity="Minor"),
    ]})  # fmt: skip
    assert call(db, "claims_check_open_major_claims", policy_id="POL-0012345678") == (
        '{"has_major_claim": true, "major_claim_count": 2}'
    )
    assert ok(db, "claims_check_open_major_claims", policy_id="POL-0087654321")["has_major_claim"] is False
    assert call(db, "claims_check_open_major_claims", policy_id="P") == err(
        "claims_check_open_major_claims", "Policy 'P' not found."
    )


# ---- lookup ----------------------------------------------------------------------
def test_validate_vin_decoding(db: psycopg.Connection[Any]) -> None:
    assert call(db, "lookup_validate_vin", vin=" 1hgcm82633a123456 ") == (
        '{"valid": true, "make": "Honda", "model": "Accord"}'
    )  # 10th character '3': no year
    assert call(db, "lookup_validate_vin", vin="JTMBWRFV2P1835721") == '{"valid": true, "year": 2023}'
    assert call(db, "lookup_validate_vin", vin="2HGFE2F53RH126486") == (
        '{"valid": true, "year": 2024, "make": "Honda Canada"}'
    )
    # Quirk 14: 'S' (2025) is not decoded; I/O/Q are accepted.
    assert call(db, "lookup_validate_vin", vin="5YJSA1E58SF839200") == (
        '{"valid": true, "make": "Tesla", "model": "Model S"}'
    )
    assert call(db, "lookup_validate_vin", vin="IOQ45678901234567") == '{"valid": true}'
    assert call(db, "lookup_validate_vin", vin="1HGCM82633A12345") == err(
        "lookup_validate_vin", "Invalid VIN format. VIN must be exactly 17 characters."
    )
    assert call(db, "lookup_validate_vin", vin="1HGCM82633A-23456") == err(
        "lookup_validate_vin", "Invalid VIN format. VIN must contain only letters and numbers."
    )


# ---- cross-cutting -----------------------------------------------------------------
def test_unknown_parameters_ignored_except_policy_search(db: psycopg.Connection[Any]) -> None:
    # Quirk 18.
    assert ok(db, "policy_get_policy_details", policy_id="POL-0012345678", verbose=True)["status"] == "Active"
    assert call(db, "knowledge_base_search_policy", query="refund", verbose=True) == err(
        "knowledge_base_search_policy", "Input validation failed: verbose: Extra inputs are not permitted"
    )


def test_string_parameters_reject_numbers(db: psycopg.Connection[Any]) -> None:
    assert call(db, "billing_get_account_details", policy_id=12345678) == err(
        "billing_get_account_details", "Input validation failed: policy_id: Input should be a valid string"
    )


def test_data_patch_replaces_rows_whole_and_never_deletes_seed(db: psycopg.Connection[Any]) -> None:
    # Quirk 11: upsert in place (whole row replaced, defaults refilled); empty lists change nothing.
    reload(db, DOMAIN, {"claims_claims": [], "crm_customers": [
        {"id": "CUS-00012345", "email": "new@x.com", "first_name": "Rob", "last_name": "Chen",
         "date_of_birth": "1985-03-15", "unknown_key": 1},
    ]})  # fmt: skip
    assert len(rows(db, "claims_claims")) == 5
    customers = rows(db, "crm_customers")
    assert customers[0] == {
        "id": "CUS-00012345", "email": "new@x.com", "first_name": "Rob", "last_name": "Chen",
        "date_of_birth": "1985-03-15", "phone": None, "tier": "Standard", "fraud_flag": False,
        "ssn_last_4": None, "security_question": None, "security_answer": None,
    }  # fmt: skip
    assert len(customers) == 5


def test_data_patch_rejects_tables_of_tool_only_subsystems() -> None:
    # lookup and knowledge_base contribute no tables (spec §1.1).
    with pytest.raises(DataPatchError) as info:
        initial_rows(
            DOMAIN.tables, domain_seed(DOMAIN.module), {"lookup_anything": [], "policy_vehicles": "x"}
        )
    assert str(info.value) == (
        "Data patch validation failed: Unknown table 'lookup_anything'; "
        "Table 'policy_vehicles' must contain a list of items"
    )
