"""Consulting domain tools (everything but Zendesk): exact reply texts, state
changes, at least one error per tool and the quirks of spec/consulting.md
§5.2, run against a throwaway database on the host PostgreSQL
(TBX_TEST_PG_DSN, default the local test server on /tmp:55432).

The module loads the pure seed once; every test runs inside a transaction
that is rolled back afterwards (tool calls nest as savepoints)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from pg_support import DomainTools, domain_seed, err, ok

from judge import canonical_state
from servers.domains.consulting.common import Action, api_tool
from servers.domains.consulting.domain import DOMAIN
from servers.domains.consulting.workday import WorkdayInput
from servers.engine.rows import to_state_row
from servers.engine.seeding import initial_rows
from servers.engine.store import Store
from servers.engine.tools import ToolContext, run_tool

TABLES = {t.name: t for t in DOMAIN.tables}
T = DomainTools(DOMAIN)
call, state, put = T.call, T.state, T.put


# ---- fixtures and helpers ---------------------------------------------------
SUCCESS = ok({"success": True})


# ---- listing ------------------------------------------------------------------
def test_listing_order_and_policy_tool() -> None:
    names = [t.name for t in DOMAIN.tools]
    assert names[:7] == [
        "zendesk_create_item",
        "zendesk_delete_item",
        "zendesk_get_item",
        "zendesk_get_items",
        "zendesk_get_tables",
        "zendesk_search_articles",
        "zendesk_update_item",
    ]
    assert names[7:] == [
        "software_catalog_get_details",
        "software_catalog_search",
        "salesforce_crm_check_employee_assignment",
        "salesforce_crm_get_engagement",
        "workday_api",
        "okta_provision_access",
        "mavenlink_api",
        "concur_api",
        "asset_management_api",
        "license_management_api",
        "degreed_api",
        "client_access_api",
        "approval_create_request",
        "approval_get_status",
        "background_check_api",
        "nda_api",
        "box_api",
        "approver_lookup_get_contact",
        "hardware_procurement_create_order",
        "knowledge_base_search_policy",
    ]
    assert DOMAIN.policy_tool == "knowledge_base_search_policy"
    assert len(DOMAIN.tables) == 30


# ---- argument validation (common rules) ----------------------------------------
def test_unknown_argument_rejected(db: psycopg.Connection[Any]) -> None:
    assert call(db, "software_catalog_search", software_name="x", limit=3) == err(
        "software_catalog_search", "Input validation failed: limit: Extra inputs are not permitted"
    )


def test_string_parameter_rejects_number(db: psycopg.Connection[Any]) -> None:
    assert call(db, "software_catalog_search", software_name=5) == err(
        "software_catalog_search", "Input validation failed: software_name: Input should be a valid string"
    )


def test_errors_listed_in_declaration_order(db: psycopg.Connection[Any]) -> None:
    assert call(db, "approval_create_request", amount=1.5) == err(
        "approval_create_request",
        "Input validation failed: request_type: Field required; requester_email: Field required; "
        "approver_email: Field required; amount: Input should be a valid integer, got a number with a "
        "fractional part",
    )


def test_action_enum_message(db: psycopg.Connection[Any]) -> None:
    assert call(db, "workday_api", action="get_employees") == err(
        "workday_api", "Input validation failed: action: Input should be 'get_employee'"
    )
    assert call(db, "nda_api", action="sign") == err(
        "nda_api", "Input validation failed: action: Input should be 'check_status' or 'send_for_signature'"
    )


def test_master_tool_wraps_unexpected_failures(db: psycopg.Connection[Any]) -> None:
    def boom(ctx: ToolContext, args: Any) -> Any:
        raise RuntimeError("kaput")

    t = api_tool("workday_api", WorkdayInput, "test", "Workday", {"get_employee": Action((), boom)})
    reply = run_tool(t, ToolContext(db=Store(db, DOMAIN.tables)), {"action": "get_employee"})
    assert reply == err("workday_api", "Failed to execute Workday API action: kaput")


# ---- software catalog ---------------------------------------------------------
def test_software_search_substring_case_insensitive(db: psycopg.Connection[Any]) -> None:
    assert call(db, "software_catalog_search", software_name="ENTERPRISE C") == ok(
        {
            "results": [
                {
                    "id": "CAT-0101234",
                    "name": "Zulip Enterprise Cloud",
                    "annual_cost": 150,
                    "pool_type": "enterprise",
                }
            ]
        }
    )


def test_software_search_empty_string_matches_all(db: psycopg.Connection[Any]) -> None:
    results = json.loads(call(db, "software_catalog_search", software_name=""))["results"]
    assert [r["id"] for r in results] == [
        r["id"] for r in domain_seed(DOMAIN.module)["software_catalog_software_catalog"]
    ]


def test_software_search_no_match_is_an_error(db: psycopg.Connection[Any]) -> None:
    assert call(db, "software_catalog_search", software_name="PhotoShop") == err(
        "software_catalog_search", "No matching software found in catalog for: PhotoShop"
    )


def test_software_get_details(db: psycopg.Connection[Any]) -> None:
    assert call(db, "software_catalog_get_details", catalog_id="CAT-0012345") == ok(
        {
            "id": "CAT-0012345",
            "name": "Fiddler AI Explainability Platform",
            "annual_cost": 840,
            "pool_type": "standard",
        }
    )
    assert call(db, "software_catalog_get_details", catalog_id="cat-0012345") == err(
        "software_catalog_get_details", "Software not found in catalog: cat-0012345"
    )


# ---- salesforce ---------------------------------------------------------------
def test_salesforce_get_engagement_omits_null_end(db: psycopg.Connection[Any]) -> None:
    assert call(db, "salesforce_crm_get_engagement", engagement_code="ENG-0034567") == ok(
        {
            "engagement_code": "ENG-0034567",
            "client_id": "CLT-0012345",
            "engagement_manager_email": "emily.rodriguez@msg.com",
            "status": "pipeline",
            "start_date": "2025-01-01T00:00:00+00:00",
        }
    )
    assert call(db, "salesforce_crm_get_engagement", engagement_code="ENG-9") == err(
        "salesforce_crm_get_engagement", "Engagement not found: ENG-9"
    )


def test_salesforce_assignment_reads_mavenlink(db: psycopg.Connection[Any]) -> None:
    assert call(
        db,
        "salesforce_crm_check_employee_assignment",
        email="bob.taylor@msg.com",
        engagement_code="ENG-0034567",
    ) == ok({"assigned": True, "assignment_status": "booked", "start_date": "2025-01-01T00:00:00+00:00"})
    assert call(
        db,
        "salesforce_crm_check_employee_assignment",
        email="marcus.bennett@msg.com",
        engagement_code="ENG-0012345",
    ) == ok(
        {
            "assigned": True,
            "assignment_status": "active",
            "start_date": "2024-01-15T00:00:00+00:00",
            "end_date": "2024-12-31T00:00:00+00:00",
        }
    )
    assert call(
        db,
        "salesforce_crm_check_employee_assignment",
        email="bob.taylor@msg.com",
        engagement_code="ENG-0012345",
    ) == ok({"assigned": False})
    assert call(db, "salesforce_crm_check_employee_assignment", email="bob.taylor@msg.com") == err(
        "salesforce_crm_check_employee_assignment", "Input validation failed: engagement_code: Field required"
    )


# ---- workday / approver lookup ------------------------------------------------
def test_workday_get_employee_omits_nulls(db: psycopg.Connection[Any]) -> None:
    assert call(db, "workday_api", action="get_employee", email="richard.williams@msg.com") == ok(
        {
            "employee_data": {
                "email": "richard.williams@msg.com",
                "name": "Richard Williams",
                "level": "Partner",
                "office_location": "New York",
                "start_date": "2010-05-01T00:00:00+00:00",
                "onboarding_phase": "completed",
                "availability_status": "available",
            }
        }
    )


def test_workday_errors(db: psycopg.Connection[Any]) -> None:
    assert call(db, "workday_api", action="get_employee") == err(
        "workday_api", "Missing required parameter: email"
    )
    assert call(db, "workday_api", action="get_employee", email="") == err(
        "workday_api", "Missing required parameter: email"
    )
    assert call(db, "workday_api", action="get_employee", email="Marcus.Bennett@msg.com") == err(
        "workday_api", "Employee not found: Marcus.Bennett@msg.com"
    )


def test_naive_patch_dates_render_without_suffix(db: psycopg.Connection[Any]) -> None:
    put(
        db,
        "workday_employees",
        {
            "email": "new.hire@msg.com",
            "name": "New Hire",
            "level": "Analyst",
            "office_location": "Austin",
            "start_date": "2025-09-24",
        },
    )
    assert call(db, "workday_api", action="get_employee", email="new.hire@msg.com") == ok(
        {
            "employee_data": {
                "email": "new.hire@msg.com",
                "name": "New Hire",
                "level": "Analyst",
                "office_location": "Austin",
                "start_date": "2025-09-24T00:00:00",
                "availability_status": "available",
            }
        }
    )
    assert state(db, "workday_employees")[-1]["start_date"] == "2025-09-24T00:00:00"


def test_datetime_offsets_kept(db: psycopg.Connection[Any]) -> None:
    booking = {
        "id": "TRV-9",
        "employee_email": "a@msg.com",
        "destination": "Pune",
        "departure_date": "2025-10-20T09:30:00+05:30",
        "return_date": "2025-10-22T18:00:00.12Z",
    }
    put(db, "concur_travel_requests", booking)
    assert call(db, "concur_api", action="get_travel_booking", booking_id="TRV-9") == ok(
        {
            "travel_booking": {
                "id": "TRV-9",
                "employee_email": "a@msg.com",
                "destination": "Pune",
                "departure_date": "2025-10-20T09:30:00+05:30",
                "return_date": "2025-10-22T18:00:00.120000+00:00",
                "flight_class": "economy",
            }
        }
    )
    row = state(db, "concur_travel_requests")[-1]
    assert (row["departure_date"], row["return_date"]) == (
        "2025-10-20T09:30:00+05:30",
        "2025-10-22T18:00:00.120000Z",
    )


def test_approver_lookup(db: psycopg.Connection[Any]) -> None:
    assert call(db, "approver_lookup_get_contact", email="michael.chen@msg.com") == ok(
        {
            "email": "michael.chen@msg.com",
            "name": "Michael Chen",
            "availability_status": "on_leave",
            "backup_approver_email": "sarah.johnson@msg.com",
        }
    )
    # The backup key is left out when there is none.
    assert call(db, "approver_lookup_get_contact", email="jennifer.patel@msg.com") == ok(
        {"email": "jennifer.patel@msg.com", "name": "Jennifer Patel", "availability_status": "available"}
    )
    assert call(db, "approver_lookup_get_contact", email="nobody@msg.com") == err(
        "approver_lookup_get_contact", "Approver not found: nobody@msg.com"
    )


# ---- okta -----------------------------------------------------------------------
def test_okta_provision_defaults_and_ids(db: psycopg.Connection[Any]) -> None:
    assert call(db, "okta_provision_access", email="a@msg.com", app_name="Slack", access_type=None) == SUCCESS
    assert (
        call(db, "okta_provision_access", email="a@msg.com", app_name="Slack", access_type="read_only")
        == SUCCESS
    )
    assert state(db, "okta_application_access_logs")[-2:] == [
        {
            "id": "AAL-2-000000",
            "employee_email": "a@msg.com",
            "app_name": "Slack",
            "access_type": "full_access",
        },
        {
            "id": "AAL-2-000001",
            "employee_email": "a@msg.com",
            "app_name": "Slack",
            "access_type": "read_only",
        },
    ]


def test_okta_errors(db: psycopg.Connection[Any]) -> None:
    assert call(db, "okta_provision_access", email="a@msg.com") == err(
        "okta_provision_access", "Input validation failed: app_name: Field required"
    )
    assert call(db, "okta_provision_access", email="a@msg.com", app_name="X", access_type="owner") == err(
        "okta_provision_access",
        "Input validation failed: access_type: Input should be 'full_access', 'read_only', 'contributor' or 'admin'",
    )
    assert len(state(db, "okta_application_access_logs")) == 10


def test_generated_ids_fill_gaps_from_zero(db: psycopg.Connection[Any]) -> None:
    put(
        db,
        "approval_approval_requests",
        {"id": "APR-2-000001", "request_type": "travel", "requester_email": "x", "approver_email": "y"},
    )
    args = {"request_type": "travel", "requester_email": "a@msg.com", "approver_email": "b@msg.com"}
    assert call(db, "approval_create_request", **args) == ok({"approval_id": "APR-2-000000"})
    assert call(db, "approval_create_request", **args) == ok({"approval_id": "APR-2-000002"})


# ---- mavenlink ------------------------------------------------------------------
def test_mavenlink_actions(db: psycopg.Connection[Any]) -> None:
    assert call(db, "mavenlink_api", action="get_engagement", engagement_code="ENG-0067890") == ok(
        {
            "engagement_data": {
                "engagement_code": "ENG-0067890",
                "status": "cancelled",
                "start_date": "2024-05-01T00:00:00+00:00",
                "senior_manager_email": "robert.brown@msg.com",
            }
        }
    )
    assert call(db, "mavenlink_api", action="get_employee_assignments", email="emma.garcia@msg.com") == ok(
        {
            "assignments": [
                {
                    "engagement_code": "ENG-0078901",
                    "assignment_status": "booked",
                    "start_date": "2024-06-01T00:00:00+00:00",
                    "end_date": "2025-03-31T00:00:00+00:00",
                    "senior_manager_email": "amanda.martinez@msg.com",
                }
            ]
        }
    )
    assert call(db, "mavenlink_api", action="get_employee_assignments", email="x@msg.com") == ok(
        {"assignments": []}
    )


def test_mavenlink_validate_checks_existence_only(db: psycopg.Connection[Any]) -> None:
    # A cancelled engagement is still "valid"; Salesforce-only codes are not.
    assert call(db, "mavenlink_api", action="validate_engagement_code", engagement_code="ENG-0067890") == ok(
        {"valid": True}
    )
    assert call(db, "mavenlink_api", action="validate_engagement_code", engagement_code="ENG-1234567") == ok(
        {"valid": False}
    )


def test_mavenlink_errors(db: psycopg.Connection[Any]) -> None:
    assert call(db, "mavenlink_api", action="get_engagement", email="a@msg.com") == err(
        "mavenlink_api", "Missing required parameter: engagement_code"
    )
    assert call(db, "mavenlink_api", action="get_engagement", engagement_code="ENG-1") == err(
        "mavenlink_api", "Engagement not found: ENG-1"
    )


# ---- concur ---------------------------------------------------------------------
def test_concur_get_expense_report(db: psycopg.Connection[Any]) -> None:
    assert call(db, "concur_api", action="get_expense_report", expense_report_id="EXP-1000001") == ok(
        {
            "expense_report": {
                "id": "EXP-1000001",
                "employee_email": "marcus.bennett@msg.com",
                "amount": 125,
                "category": "meals",
                "trip_location_city": "New York",
                "trip_location_state": "NY",
                "expense_date": "2024-10-15T00:00:00+00:00",
                "receipt_status": "attached",
                "override_approved": False,
            }
        }
    )


def test_concur_override_updates_in_place(db: psycopg.Connection[Any]) -> None:
    before = state(db, "concur_expense_reports")
    reply = call(
        db,
        "concur_api",
        action="override_expense_rejection",
        expense_report_id="EXP-1000002",
        override_reason="receipt_exception",
        approver_email="michael.chen@msg.com",
    )
    assert reply == SUCCESS
    after = state(db, "concur_expense_reports")
    assert after[1] == {
        **before[1],
        "override_approved": True,
        "override_approved_by": "michael.chen@msg.com",
        "override_reason": "receipt_exception",
    }
    assert after[1]["rejection_reason"] == "Receipt missing - required for hotel expenses over $150"
    assert after[:1] + after[2:] == before[:1] + before[2:]


def test_concur_errors(db: psycopg.Connection[Any]) -> None:
    assert call(
        db,
        "concur_api",
        action="override_expense_rejection",
        expense_report_id="EXP-1000002",
        approver_email="m",
    ) == err("concur_api", "Missing required parameter: override_reason")
    assert call(
        db,
        "concur_api",
        action="override_expense_rejection",
        expense_report_id="EXP-1",
        override_reason="system_error",
        approver_email="m",
    ) == err("concur_api", "Expense report not found: EXP-1")
    assert call(db, "concur_api", action="get_travel_booking", booking_id="TRV-1") == err(
        "concur_api", "Travel booking not found: TRV-1"
    )
    assert call(db, "concur_api", action="get_expense_report", override_reason="late") == err(
        "concur_api",
        "Input validation failed: override_reason: Input should be 'justified_exception', 'system_error' or "
        "'receipt_exception'",
    )


def test_concur_get_travel_booking(db: psycopg.Connection[Any]) -> None:
    assert call(db, "concur_api", action="get_travel_booking", booking_id="TRV-1000004") == ok(
        {
            "travel_booking": {
                "id": "TRV-1000004",
                "employee_email": "bob.taylor@msg.com",
                "destination": "Boston, MA",
                "departure_date": "2024-12-10T10:00:00+00:00",
                "return_date": "2024-12-14T17:45:00+00:00",
                "flight_class": "economy",
            }
        }
    )


# ---- asset management -------------------------------------------------------------
def test_asset_employee_devices_skip_returned(db: psycopg.Connection[Any]) -> None:
    assert call(
        db, "asset_management_api", action="get_employee_devices", email="marcus.bennett@msg.com"
    ) == ok(
        {
            "devices": [
                {"id": "ASMT-1000001", "asset_id": "MSG00001003", "employee_email": "marcus.bennett@msg.com"}
            ]
        }
    )
    assert call(db, "asset_management_api", action="get_employee_devices", email="bob.taylor@msg.com") == ok(
        {"devices": []}
    )


def test_asset_device_details(db: psycopg.Connection[Any]) -> None:
    assert call(db, "asset_management_api", action="get_device_details", asset_id="MSG00005002") == ok(
        {
            "device_data": {
                "id": "MSG00005002",
                "device_type": "laptop",
                "model": "Razer Blade 14 (2024)",
                "age_months": 5,
                "inventory_status": "available",
                "location": "Chicago",
            }
        }
    )
    assert call(db, "asset_management_api", action="get_device_details", asset_id="MSG0") == err(
        "asset_management_api", "Device not found: MSG0"
    )


def test_asset_check_inventory(db: psycopg.Connection[Any]) -> None:
    assert call(
        db,
        "asset_management_api",
        action="check_inventory",
        device_type="laptop",
        location="New York",
        email="x",
    ) == ok({"available_count_by_model": {"HP ZBook Fury 17 G9": 1, "Lenovo ThinkPad P16s Gen 2": 1}})
    # No stock is an empty object, not an error.
    assert call(
        db, "asset_management_api", action="check_inventory", device_type="laptop", location="Austin"
    ) == ok({"available_count_by_model": {}})
    assert call(db, "asset_management_api", action="check_inventory", location="Austin") == err(
        "asset_management_api", "Missing required parameter: device_type"
    )


def test_asset_reserve_lowest_id_by_text(db: psycopg.Connection[Any]) -> None:
    base = {
        "device_type": "headset",
        "model": "H",
        "age_months": 1,
        "inventory_status": "available",
        "location": "Austin",
    }
    put(db, "asset_management_devices", {**base, "id": "MSG9"}, {**base, "id": "MSG10"})
    reply = call(
        db, "asset_management_api", action="reserve_device", device_type="headset", location="Austin"
    )
    assert reply == ok({"reserved_asset_id": "MSG10"})
    statuses = {r["id"]: r["inventory_status"] for r in state(db, "asset_management_devices")}
    assert (statuses["MSG10"], statuses["MSG9"]) == ("reserved", "available")


def test_asset_reserve_picks_seed_laptop_then_runs_out(db: psycopg.Connection[Any]) -> None:
    args = {"action": "reserve_device", "device_type": "laptop", "location": "Chicago", "asset_id": "ignored"}
    assert call(db, "asset_management_api", **args) == ok({"reserved_asset_id": "MSG00005002"})
    assert call(db, "asset_management_api", **args) == err(
        "asset_management_api", "No available laptop devices at Chicago"
    )


def test_asset_assign_any_status_keeps_old_assignments(db: psycopg.Connection[Any]) -> None:
    reply = call(
        db,
        "asset_management_api",
        action="assign_device",
        email="marcus.bennett@msg.com",
        asset_id="MSG00003001",
    )
    assert reply == SUCCESS
    assignments = state(db, "asset_management_device_assignments")
    assert assignments[-1] == {
        "id": "ASMT-2-000000",
        "asset_id": "MSG00003001",
        "employee_email": "marcus.bennett@msg.com",
        "returned_at": None,
    }
    assert assignments[0]["returned_at"] is None  # the earlier device is not closed
    device = next(r for r in state(db, "asset_management_devices") if r["id"] == "MSG00003001")
    assert device["inventory_status"] == "assigned"  # was retired
    assert call(db, "asset_management_api", action="assign_device", asset_id="MSG00003001") == err(
        "asset_management_api", "Missing required parameter: email"
    )
    assert call(db, "asset_management_api", action="assign_device", email="a", asset_id="MSG1") == err(
        "asset_management_api", "Device not found: MSG1"
    )


def test_asset_retire_leaves_assignment_open(db: psycopg.Connection[Any]) -> None:
    assert call(db, "asset_management_api", action="retire_device", asset_id="MSG00001003") == SUCCESS
    device = next(r for r in state(db, "asset_management_devices") if r["id"] == "MSG00001003")
    assert device["inventory_status"] == "retired"
    # Retired devices still show as the employee's devices.
    assert "MSG00001003" in call(
        db, "asset_management_api", action="get_employee_devices", email="marcus.bennett@msg.com"
    )
    assert call(db, "asset_management_api", action="retire_device", asset_id="nope") == err(
        "asset_management_api", "Device not found: nope"
    )


# ---- license management ---------------------------------------------------------
def test_license_availability(db: psycopg.Connection[Any]) -> None:
    check = {"action": "check_availability", "pool_type": "standard"}
    assert call(db, "license_management_api", catalog_id="CAT-1000001", **check) == ok({"available_count": 8})
    # Deallocated seats are free again.
    assert call(db, "license_management_api", catalog_id="CAT-1000003", **check) == ok({"available_count": 4})
    assert call(
        db,
        "license_management_api",
        action="check_availability",
        catalog_id="CAT-1000002",
        pool_type="enterprise",
    ) == ok({"available_count": 99999})
    assert call(db, "license_management_api", catalog_id="CAT-1000002", **check) == err(
        "license_management_api", "License pool not found for catalog_id=CAT-1000002, pool_type=standard"
    )


def test_license_allocate_ignores_capacity(db: psycopg.Connection[Any]) -> None:
    alloc = {"action": "allocate", "catalog_id": "CAT-1000005", "pool_type": "standard"}
    for i in range(4):
        assert call(db, "license_management_api", email=f"u{i}@msg.com", **alloc) == SUCCESS
    assert call(
        db,
        "license_management_api",
        action="check_availability",
        catalog_id="CAT-1000005",
        pool_type="standard",
    ) == ok({"available_count": -1})
    assert state(db, "license_management_license_allocation")[-1] == {
        "id": "LIC-2-000003",
        "catalog_id": "CAT-1000005",
        "employee_email": "u3@msg.com",
        "engagement_code": None,
        "pool_type": "standard",
        "deallocated_at": None,
    }
    assert call(
        db, "license_management_api", action="allocate", catalog_id="CAT-1000005", pool_type="standard"
    ) == err("license_management_api", "Missing required parameter: email")


def test_license_get_cost_reads_catalog(db: psycopg.Connection[Any]) -> None:
    assert call(db, "license_management_api", action="get_cost", catalog_id="CAT-0145678") == ok(
        {"annual_cost": 5195}
    )
    assert call(db, "license_management_api", action="get_cost", catalog_id="CAT-1000001") == err(
        "license_management_api", "Software catalog entry not found: CAT-1000001"
    )


# ---- degreed ---------------------------------------------------------------------
def test_degreed_search_courses(db: psycopg.Connection[Any]) -> None:
    reply = json.loads(call(db, "degreed_api", action="search_courses", keyword="CONFERENCE"))
    assert [c["id"] for c in reply["courses"]] == ["CRS-1000005", "CRS-1000010"]
    assert call(
        db, "degreed_api", action="search_courses", keyword="conference", category="nice_to_have"
    ) == ok({"courses": []})
    assert call(db, "degreed_api", action="search_courses", keyword="") == err(
        "degreed_api", "Missing required parameter: keyword"
    )


def test_degreed_course_details(db: psycopg.Connection[Any]) -> None:
    assert call(db, "degreed_api", action="get_course_details", course_id="CRS-1000001") == ok(
        {
            "course_data": {
                "id": "CRS-1000001",
                "title": "Formal Methods for Safety-Critical Systems with TLA+",
                "cost": 0,
                "training_category": "must_have",
                "prerequisites": [],
            }
        }
    )
    assert call(db, "degreed_api", action="get_course_details", course_id="CRS-1") == err(
        "degreed_api", "Course not found: CRS-1"
    )


def test_degreed_seats_and_enroll_without_checks(db: psycopg.Connection[Any]) -> None:
    assert call(db, "degreed_api", action="check_enrollment", course_id="CRS-1000002") == ok(
        {"available_seats": 19}
    )
    assert call(db, "degreed_api", action="check_enrollment", course_id="CRS-1000001") == ok(
        {"available_seats": 99999}
    )
    put(
        db,
        "degreed_training_courses",
        {**domain_seed(DOMAIN.module)["degreed_training_courses"][9], "max_seats": "1"},
    )
    for _ in range(2):
        assert (
            call(db, "degreed_api", action="enroll_employee", email="a@msg.com", course_id="CRS-1000010")
            == SUCCESS
        )
    assert call(db, "degreed_api", action="check_enrollment", course_id="CRS-1000010") == ok(
        {"available_seats": -1}
    )
    assert state(db, "degreed_training_enrollments")[-2:] == [
        {
            "id": "ENR-2-000000",
            "employee_email": "a@msg.com",
            "course_id": "CRS-1000010",
            "completion_date": None,
        },
        {
            "id": "ENR-2-000001",
            "employee_email": "a@msg.com",
            "course_id": "CRS-1000010",
            "completion_date": None,
        },
    ]
    assert call(db, "degreed_api", action="enroll_employee", email="a@msg.com", course_id="CRS-0") == err(
        "degreed_api", "Course not found: CRS-0"
    )


def test_degreed_training_history(db: psycopg.Connection[Any]) -> None:
    assert call(db, "degreed_api", action="get_training_history", email="marcus.bennett@msg.com") == ok(
        {
            "completed_trainings": [{"course_id": "CRS-1000001"}],
            "certifications": [
                {
                    "id": "CERT-1000003",
                    "employee_email": "marcus.bennett@msg.com",
                    "certification_name": "AWS Certified Solutions Architect",
                    "issued_date": "2024-06-15T00:00:00+00:00",
                    "expiry_date": "2027-06-15T00:00:00+00:00",
                }
            ],
        }
    )
    assert call(db, "degreed_api", action="get_training_history", email="x@msg.com") == ok(
        {"completed_trainings": [], "certifications": []}
    )


def test_degreed_certification_name_case_insensitive(db: psycopg.Connection[Any]) -> None:
    check = {"action": "check_certification_status", "certification_name": "hipaa"}
    assert call(db, "degreed_api", email="jennifer.patel@msg.com", **check) == ok({"has_certification": True})
    assert call(db, "degreed_api", email="JENNIFER.PATEL@msg.com", **check) == ok(
        {"has_certification": False}
    )
    assert call(db, "degreed_api", action="check_certification_status", email="a@msg.com") == err(
        "degreed_api", "Missing required parameter: certification_name"
    )


def test_degreed_required_trainings(db: psycopg.Connection[Any]) -> None:
    assert call(db, "degreed_api", action="get_required_trainings", client_id="CLT-0023456") == ok(
        {"required_courses": ["CRS-0034567", "CRS-0045678", "CRS-0056789"]}
    )
    assert call(db, "degreed_api", action="get_required_trainings", client_id="CLT-9") == err(
        "degreed_api", "Client not found: CLT-9"
    )


# ---- client access ----------------------------------------------------------------
def test_client_access_vpn_provision_and_check(db: psycopg.Connection[Any]) -> None:
    assert call(db, "client_access_api", action="provision_vpn", email="jennifer.patel@msg.com") == SUCCESS
    assert (
        call(
            db,
            "client_access_api",
            action="provision_vpn",
            email="jennifer.patel@msg.com",
            client_id="CLT-0012345",
        )
        == SUCCESS
    )
    assert call(db, "client_access_api", action="check_vpn_access", email="jennifer.patel@msg.com") == ok(
        {
            "vpn_access": [
                {"id": "VPN-1000001", "employee_email": "jennifer.patel@msg.com"},
                {"id": "VPN-2-000000", "employee_email": "jennifer.patel@msg.com"},
                {
                    "id": "VPN-2-000001",
                    "employee_email": "jennifer.patel@msg.com",
                    "client_id": "CLT-0012345",
                },
            ]
        }
    )
    assert call(db, "client_access_api", action="check_vpn_access") == err(
        "client_access_api", "Missing required parameter: email"
    )


def test_client_access_revoke_vpn_scope(db: psycopg.Connection[Any]) -> None:
    email = "jennifer.patel@msg.com"
    for client in ("CLT-A", "CLT-A", None):
        call(db, "client_access_api", action="provision_vpn", email=email, client_id=client)
    # With a client id: only the first active match.
    assert call(db, "client_access_api", action="revoke_vpn", email=email, client_id="CLT-A") == SUCCESS
    revoked = {
        r["id"]: r["revoked_at"]
        for r in state(db, "client_access_vpn_access")
        if r["employee_email"] == email
    }
    assert revoked == {
        "VPN-1000001": None,
        "VPN-2-000000": "2025-10-01T00:00:00Z",
        "VPN-2-000001": None,
        "VPN-2-000002": None,
    }
    # Without: every active row of the employee; other employees untouched.
    assert call(db, "client_access_api", action="revoke_vpn", email=email) == SUCCESS
    rows = state(db, "client_access_vpn_access")
    assert all(r["revoked_at"] == "2025-10-01T00:00:00Z" for r in rows if r["employee_email"] == email)
    assert next(r for r in rows if r["id"] == "VPN-1000002")["revoked_at"] is None
    # Nothing to revoke is still a success.
    assert call(db, "client_access_api", action="revoke_vpn", email="nobody@msg.com") == SUCCESS


def test_client_access_provision_system(db: psycopg.Connection[Any]) -> None:
    args = {
        "action": "provision_client_system",
        "email": "a@msg.com",
        "client_id": "CLT-0023456",
        "system_name": "EHR",
    }
    assert call(db, "client_access_api", **args) == err(
        "client_access_api", "Missing required parameter: access_type"
    )
    assert call(db, "client_access_api", access_type="read_only", **args) == SUCCESS
    assert state(db, "client_access_client_system_access")[-1] == {
        "id": "CSA-2-000000",
        "employee_email": "a@msg.com",
        "client_id": "CLT-0023456",
        "system_name": "EHR",
        "access_type": "read_only",
        "revoked_at": None,
    }


def test_client_access_requirements_and_prerequisites(db: psycopg.Connection[Any]) -> None:
    assert call(db, "client_access_api", action="check_client_requirements", client_id="CLT-0045678") == ok(
        {
            "requirements": {
                "clearance_level": "standard",
                "requires_nda": False,
                "required_training_courses": [],
            }
        }
    )
    assert call(db, "client_access_api", action="check_client_requirements", client_id="CLT-1") == err(
        "client_access_api", "Client not found: CLT-1"
    )
    prereq = {"action": "get_employee_prerequisites", "client_id": "CLT-0067890"}
    assert call(db, "client_access_api", email="robert.nguyen@msg.com", **prereq) == ok(
        {
            "clearance_status": "in_progress",
            "nda_status": "sent_for_signature",
            "completed_training_courses": ["CRS-1000012"],
        }
    )
    assert call(db, "client_access_api", email="x@msg.com", **prereq) == ok(
        {"clearance_status": "not_initiated", "nda_status": "not_signed", "completed_training_courses": []}
    )


# ---- approval --------------------------------------------------------------------
def test_approval_create_and_get_status(db: psycopg.Connection[Any]) -> None:
    reply = call(
        db,
        "approval_create_request",
        request_type="software_access",
        requester_email="a@msg.com",
        approver_email="b@msg.com",
        amount="500",
        engagement_code="ENG-1",
    )
    assert reply == ok({"approval_id": "APR-2-000000"})
    assert state(db, "approval_approval_requests")[-1] == {
        "id": "APR-2-000000",
        "request_type": "software_access",
        "requester_email": "a@msg.com",
        "approver_email": "b@msg.com",
        "amount": 500,
        "engagement_code": "ENG-1",
        "status": "pending",
    }
    assert call(db, "approval_get_status", request_type="software_access", requester_email="a@msg.com") == ok(
        {
            "results": [
                {
                    "approval_id": "APR-2-000000",
                    "status": "pending",
                    "request_type": "software_access",
                    "approver_email": "b@msg.com",
                    "engagement_code": "ENG-1",
                }
            ]
        }
    )


def test_approval_get_status_filters_and_placeholder(db: psycopg.Connection[Any]) -> None:
    base = {"request_type": "training_cost", "requester_email": "robert.nguyen@msg.com"}
    assert call(db, "approval_get_status", **base) == ok(
        {
            "results": [
                {
                    "approval_id": "APR-1000004",
                    "status": "rejected",
                    "request_type": "training_cost",
                    "approver_email": "sarah.johnson@msg.com",
                }
            ]
        }
    )
    # An empty engagement code counts as given (and matches nothing here).
    assert call(db, "approval_get_status", engagement_code="", **base) == ok(
        {
            "results": [
                {
                    "approval_id": "NOT_FOUND",
                    "status": "not_found",
                    "request_type": "training_cost",
                    "approver_email": "",
                    "engagement_code": "",
                }
            ]
        }
    )
    assert call(db, "approval_get_status", approver_email="z@msg.com", **base) == ok(
        {
            "results": [
                {
                    "approval_id": "NOT_FOUND",
                    "status": "not_found",
                    "request_type": "training_cost",
                    "approver_email": "z@msg.com",
                }
            ]
        }
    )


def test_approval_errors(db: psycopg.Connection[Any]) -> None:
    assert call(db, "approval_get_status", request_type="vacation", requester_email="a") == err(
        "approval_get_status",
        "Input validation failed: request_type: Input should be 'software_access', 'hardware_replacement', "
        "'client_access', 'training_engagement_coordination', 'training_cost', 'expense_override', 'travel' "
        "or 'document_access'",
    )
    assert call(
        db,
        "approval_create_request",
        request_type="travel",
        requester_email="a",
        approver_email="b",
        amount="1e3",
    ) == err(
        "approval_create_request",
        "Input validation failed: amount: Input should be a valid integer, unable to parse string as an integer",
    )


# ---- background check / nda ----------------------------------------------------------
def test_background_check_status_and_timeline(db: psycopg.Connection[Any]) -> None:
    assert call(db, "background_check_api", action="get_status", email="marcus.bennett@msg.com") == ok(
        {"clearance_data": {"clearance_level": "high_security", "status": "cleared"}}
    )
    assert call(
        db, "background_check_api", action="get_status", email="x@msg.com", clearance_level="high_security"
    ) == ok({"clearance_data": {"clearance_level": "standard", "status": "not_initiated"}})
    assert call(db, "background_check_api", action="get_timeline", clearance_level="standard") == ok(
        {"estimated_days": 14}
    )
    assert call(db, "background_check_api", action="get_timeline", clearance_level="high_security") == ok(
        {"estimated_days": 28}
    )
    assert call(db, "background_check_api", action="get_timeline", email="x@msg.com") == err(
        "background_check_api", "Missing required parameter: clearance_level"
    )


def test_background_check_initiate_upserts(db: psycopg.Connection[Any]) -> None:
    before = state(db, "client_access_clearance_record")
    # Existing row: downgraded in place, level overwritten.
    assert (
        call(
            db,
            "background_check_api",
            action="initiate",
            email="marcus.bennett@msg.com",
            clearance_level="standard",
        )
        == SUCCESS
    )
    # New row: appended at the end (this table keeps storage order in the hash).
    assert (
        call(
            db, "background_check_api", action="initiate", email="a@msg.com", clearance_level="high_security"
        )
        == SUCCESS
    )
    after = state(db, "client_access_clearance_record")
    assert after[1] == {
        "employee_email": "marcus.bennett@msg.com",
        "clearance_level": "standard",
        "status": "in_progress",
    }
    assert after[-1] == {
        "employee_email": "a@msg.com",
        "clearance_level": "high_security",
        "status": "in_progress",
    }
    assert [r["employee_email"] for r in after] == [r["employee_email"] for r in before] + ["a@msg.com"]
    assert call(db, "background_check_api", action="initiate", email="a@msg.com") == err(
        "background_check_api", "Missing required parameter: clearance_level"
    )


def test_nda_check_and_send(db: psycopg.Connection[Any]) -> None:
    check = {"action": "check_status", "client_id": "CLT-0012345"}
    assert call(db, "nda_api", email="jennifer.patel@msg.com", **check) == ok(
        {"signed": True, "nda_data": {"status": "signed"}}
    )
    assert call(db, "nda_api", email="david.garcia@msg.com", **check) == ok(
        {"signed": False, "nda_data": {"status": "expired"}}
    )
    assert call(db, "nda_api", email="x@msg.com", **check) == ok(
        {"signed": False, "nda_data": {"status": "not_signed"}}
    )
    send = {"action": "send_for_signature", "client_id": "CLT-0012345"}
    assert call(db, "nda_api", email="jennifer.patel@msg.com", **send) == SUCCESS  # even when already signed
    assert call(db, "nda_api", email="x@msg.com", **send) == SUCCESS
    rows = state(db, "client_access_nda_record")
    assert rows[0] == {
        "employee_email": "jennifer.patel@msg.com",
        "client_id": "CLT-0012345",
        "status": "sent_for_signature",
    }
    assert rows[-1] == {
        "employee_email": "x@msg.com",
        "client_id": "CLT-0012345",
        "status": "sent_for_signature",
    }
    assert len(rows) == 9
    assert call(db, "nda_api", action="send_for_signature", email="x@msg.com") == err(
        "nda_api", "Missing required parameter: client_id"
    )


# ---- box -------------------------------------------------------------------------
def test_box_folder_details(db: psycopg.Connection[Any]) -> None:
    assert call(db, "box_api", action="get_folder_details", folder_id="FLD-1000001") == ok(
        {
            "folder_data": {
                "id": "FLD-1000001",
                "folder_name": "GDPR Article 30 Processing Records",
                "confidentiality_level": "internal",
                "owner_email": "hr@msg.com",
            }
        }
    )
    assert call(db, "box_api", action="get_folder_details", folder_id="FLD-1000002") == ok(
        {
            "folder_data": {
                "id": "FLD-1000002",
                "folder_name": "Zephyrus Biotech - Clinical Trial Protocols",
                "confidentiality_level": "client_confidential",
                "owner_email": "sarah.johnson@msg.com",
                "client_id": "CLT-1000001",
                "engagement_code": "ENG-1000001",
            }
        }
    )


def test_box_grant_access(db: psycopg.Connection[Any]) -> None:
    grant = {"action": "grant_folder_access", "email": "a@msg.com", "permission_level": "editor"}
    assert call(db, "box_api", folder_id="FLD-1000002", **grant) == SUCCESS
    assert state(db, "box_folder_access_logs")[-1] == {
        "id": "FAL-2-000000",
        "folder_id": "FLD-1000002",
        "employee_email": "a@msg.com",
        "permission_level": "editor",
    }
    assert call(db, "box_api", folder_id="FLD-0", **grant) == err("box_api", "Folder not found: FLD-0")
    assert call(
        db, "box_api", action="grant_folder_access", email="a@msg.com", folder_id="FLD-1000002"
    ) == err("box_api", "Missing required parameter: permission_level")
    assert len(state(db, "box_folder_access_logs")) == 9


# ---- hardware procurement -------------------------------------------------------------
def test_hardware_order_constant(db: psycopg.Connection[Any]) -> None:
    args = {"device_model": "Pixel", "deliver_to": "Austin"}
    assert call(db, "hardware_procurement_create_order", quantity=-3, **args) == ok(
        {"order_id": "HWO-0056435"}
    )
    assert call(db, "hardware_procurement_create_order", quantity="2", **args) == ok(
        {"order_id": "HWO-0056435"}
    )
    assert call(
        db, "hardware_procurement_create_order", device_model="Pixel", quantity=1, deliver_to="Boston"
    ) == err(
        "hardware_procurement_create_order",
        "Input validation failed: deliver_to: Input should be 'New York', 'San Francisco', 'Chicago' or 'Austin'",
    )


# ---- state-level quirks ------------------------------------------------------------
def test_patch_replaces_whole_rows_and_keeps_seed() -> None:
    report = {
        "id": "EXP-1000004",
        "employee_email": "bob.taylor@msg.com",
        "amount": 180,
        "category": "client_entertainment",
        "expense_date": "2024-10-25T00:00:00",
        "receipt_status": "itemized",
    }
    rows = initial_rows(DOMAIN.tables, domain_seed(DOMAIN.module), {"concur_expense_reports": [report]})
    expenses = rows["concur_expense_reports"]
    assert len(expenses) == 10
    replaced = to_state_row(TABLES["concur_expense_reports"], expenses[3])
    # Missing fields take defaults, not the seed row's values; the naive date stays naive.
    assert replaced["override_approved"] is False and replaced["override_approved_by"] is None
    assert replaced["expense_date"] == "2024-10-25T00:00:00"


def test_patch_rejects_unknown_keys_on_consulting_tables() -> None:
    from servers.engine.seeding import DataPatchError

    with pytest.raises(DataPatchError, match="Extra inputs are not permitted"):
        initial_rows(
            DOMAIN.tables,
            domain_seed(DOMAIN.module),
            {"box_folders": [{**domain_seed(DOMAIN.module)["box_folders"][0], "colour": "red"}]},
        )


def test_canonical_order_by_text_id_and_storage_order(db: psycopg.Connection[Any]) -> None:
    call(db, "okta_provision_access", email="a@msg.com", app_name="Zoom")
    call(db, "background_check_api", action="initiate", email="a@msg.com", clearance_level="standard")
    store = Store(db, DOMAIN.tables)
    canon = canonical_state(DOMAIN.tables, {t.name: store.all(t.name) for t in DOMAIN.tables})
    ids = [r["id"] for r in canon["okta_application_access_logs"]]
    assert ids == sorted(ids) and ids[-1] == "AAL-2-000000"
    # Text order, not numeric: "12847" sorts before "2".
    put(db, "zendesk_tickets", {"id": "12847", "subject": "s", "created_at": "c", "updated_at": "u"})
    canon = canonical_state(DOMAIN.tables, {t.name: store.all(t.name) for t in DOMAIN.tables})
    assert [r["id"] for r in canon["zendesk_tickets"]] == ["1", "12847", "2", "3", "4", "5"]
    # Id-less tables keep storage order: the new clearance row stays last.
    assert canon["client_access_clearance_record"][-1]["employee_email"] == "a@msg.com"
