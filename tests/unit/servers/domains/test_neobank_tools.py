"""Neobank IT help-desk tools (Workday, Okta, security, approvers, licences,
assets, procurement, approvals, notifications): exact reply texts, state
changes, error cases and the quirks of spec/neobank-support.md §5.3, run
against a throwaway database on the host PostgreSQL (TBX_TEST_PG_DSN, default
the local test server on /tmp:55432). Each test runs in a transaction that is
rolled back, on top of the reference seed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import DomainTools, err

from bench.dataset import Benchmark
from bench.replay.local import replay_domain
from servers.domains.neobank import common
from servers.domains.neobank.domain import DOMAIN, MAIN_TOOLS
from servers.engine.store import Store

T = DomainTools(DOMAIN)

EMP = common.EMPLOYEES
OAA = common.APP_ACCESS
OGM = common.GROUP_MEMBERSHIP
ASSETS = common.HARDWARE_ASSETS
ASN = common.ASSET_ASSIGNMENTS
OSA = common.SECURITY_AUDIT


# ---- fixtures ----------------------------------------------------------------
class Desk:
    """The seeded neobank state inside one rolled-back transaction."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn
        self.store = Store(conn, DOMAIN.tables)

    def text(self, tool: str, **params: Any) -> str:
        return T.call(self.conn, tool, **params)

    def ok(self, tool: str, **params: Any) -> Any:
        reply = json.loads(self.text(tool, **params))
        assert "error" not in reply, reply
        return reply

    def fails(self, tool: str, **params: Any) -> str:
        """The error detail (after the envelope's prefix) of a failing call."""
        reply = json.loads(self.text(tool, **params))
        assert set(reply) == {"error", "tool"} and reply["tool"] == tool, reply
        prefix = "Tool execution failed: "
        assert reply["error"].startswith(prefix), reply
        return str(reply["error"][len(prefix) :])

    def row(self, table: str, key: str) -> dict[str, Any]:
        found = self.store.get(table, key)
        assert found is not None, f"{table} has no row {key}"
        return found

    def count(self, table: str) -> int:
        return self.store.count(table)


@pytest.fixture
def desk(db: psycopg.Connection[Any]) -> Desk:
    """The seeded database (conftest's `db`: rolled back after the test)."""
    return Desk(db)


# ---- listing -----------------------------------------------------------------
def test_main_tools_follow_the_reference_listing_order(dataset: Path) -> None:
    ref = json.loads((dataset / "servers" / DOMAIN.module / "tools.json").read_text())["agent_tools"]
    ref_names = [t["name"] for t in ref]
    assert ref_names[0] == DOMAIN.tools[0].name == "knowledge_base_search_policy"
    main = [n for n in ref_names if not n.startswith(("zendesk_", "knowledge_base_"))]
    assert [t.name for t in MAIN_TOOLS] == main
    assert [t.name for t in DOMAIN.tools][-len(main) :] == main
    assert DOMAIN.policy_tool == "knowledge_base_search_policy"


def test_fixed_clocks_are_the_domain_constants() -> None:
    assert common.ASSET_NOW.isoformat() == "2025-12-17T10:00:00+00:00"
    assert common.ASSET_NOW_TEXT == "2025-12-17T10:00:00Z"
    assert common.OKTA_ACTION_NOW.isoformat() == "2025-12-18T10:00:00+00:00"
    assert common.INCIDENT_NOW.isoformat() == "2025-12-18T10:00:00+00:00"


# ---- Workday -----------------------------------------------------------------
def test_get_employee_drops_null_fields(desk: Desk) -> None:
    assert desk.text("workday_api_get_employee", email="lisa.chen@vdb.com") == (
        '{"employee_id": "WD-294817", "email": "lisa.chen@vdb.com", "full_name": "Lisa Chen", "level": 9, '
        '"department": "executive_leadership", "role": "Chief Executive Officer", "office_location": "sf", '
        '"start_date": "2018-01-15T00:00:00Z", "employment_status": "active", "is_contractor": false}'
    )
    emma = desk.ok("workday_api_get_employee", email="emma.wilson@vdb.com", unknown="ignored")
    assert emma["manager_id"] == "WD-681453"
    assert emma["remote_delivery_address"] == "2847 NW Overton St, Portland, OR 97210"
    assert "contract_end_date" not in emma


def test_get_employee_errors(desk: Desk) -> None:
    assert desk.text("workday_api_get_employee", email="Lisa.Chen@vdb.com") == err(
        "workday_api_get_employee", "No employee found with the provided email: Lisa.Chen@vdb.com"
    )
    assert desk.fails("workday_api_get_employee") == "Input validation failed: email: Field required"
    assert (
        desk.fails("workday_api_get_employee", email=5)
        == "Input validation failed: email: Input should be a valid string"
    )


def test_email_lookup_takes_the_first_row_in_store_order(desk: Desk) -> None:
    clone = {**desk.row(EMP, "WD-847291"), "id": "WD-000001", "full_name": "Second Marcus"}
    desk.store.insert(EMP, clone)
    assert desk.ok("workday_api_get_employee", email="marcus.thompson@vdb.com")["employee_id"] == "WD-847291"


def test_manager_chain(desk: Desk) -> None:
    chain = desk.ok("workday_api_get_manager_chain", email="marcus.thompson@vdb.com")["manager_chain"]
    assert [m["employee_id"] for m in chain] == ["WD-681453", "WD-573926", "WD-294817"]
    assert chain[0] == {
        "employee_id": "WD-681453",
        "email": "sarah.jones@vdb.com",
        "full_name": "Sarah Jones",
        "level": 7,
        "department": "product_engineering",
        "role": "Engineering Manager",
    }
    assert desk.text("workday_api_get_manager_chain", email="lisa.chen@vdb.com") == '{"manager_chain": []}'
    assert desk.fails("workday_api_get_manager_chain", email="x@vdb.com") == "Employee not found: x@vdb.com"


def test_manager_chain_stops_at_an_unknown_manager(desk: Desk) -> None:
    desk.store.update(EMP, "WD-573926", {"manager_id": "WD-GONE"})
    chain = desk.ok("workday_api_get_manager_chain", email="marcus.thompson@vdb.com")["manager_chain"]
    assert [m["employee_id"] for m in chain] == ["WD-681453", "WD-573926"]


def test_org_structure(desk: Desk) -> None:
    reports = desk.ok("workday_api_get_org_structure", manager_email="sarah.jones@vdb.com")["direct_reports"]
    assert [r["employee_id"] for r in reports] == [
        "WD-847291",
        "WD-192638",
        "WD-465782",
        "WD-147258",
        "WD-526714",
        "WD-892536",
    ]
    assert reports[3] == {
        "employee_id": "WD-147258",
        "email": "kevin.miller@vdb.com",
        "full_name": "Kevin Miller",
        "level": 4,
        "department": "product_engineering",
        "role": "DevOps Engineer",
        "office_location": "remote",
        "employment_status": "on_leave",
    }
    assert (
        desk.fails("workday_api_get_org_structure", manager_email="x@vdb.com")
        == "Manager not found: x@vdb.com"
    )


# ---- Okta access ---------------------------------------------------------------
def test_check_access(desk: Desk) -> None:
    assert desk.text("okta_api_check_access", email="marcus.thompson@vdb.com", app_name="Salesforce") == (
        '{"has_access": true, "access_level": "read_only", "granted_at": "2025-06-15T09:00:00Z"}'
    )
    # Exact, case-sensitive app names; revoked rows do not count.
    assert desk.ok("okta_api_check_access", email="marcus.thompson@vdb.com", app_name="salesforce") == {
        "has_access": False
    }
    assert desk.ok("okta_api_check_access", email="david.kim@vdb.com", app_name="Jira") == {
        "has_access": False
    }
    assert (
        desk.fails("okta_api_check_access", email="x@vdb.com", app_name="Jira")
        == "Employee not found: x@vdb.com"
    )


def test_provision_access_writes_a_count_based_row(desk: Desk) -> None:
    reply = desk.text(
        "okta_api_provision_access",
        email="emma.wilson@vdb.com",
        app_name="Production database",
        access_level="read_only",
        is_temporary=True,
        access_expiry_date="2025-10-02T13:00:00Z",
    )
    assert reply == '{"app_access_id": "OAA-00000012"}'
    assert desk.row(OAA, "OAA-00000012") == {
        "id": "OAA-00000012",
        "employee_id": "WD-192638",
        "app_name": "Production database",
        "access_level": "read_only",
        "granted_at": None,
        "granted_by": "system",
        "is_active": True,
        "revoked_at": None,
        "is_temporary": True,
        "expires_at": "2025-10-02T13:00:00Z",
    }
    # A tool-provisioned row has no grant time, so check_access omits it.
    assert desk.ok("okta_api_check_access", email="emma.wilson@vdb.com", app_name="Production database") == {
        "has_access": True,
        "access_level": "read_only",
    }
    # expires_at is stored even for a permanent grant.
    desk.ok(
        "okta_api_provision_access",
        email="emma.wilson@vdb.com",
        app_name="Admin Panel",
        access_level="write non-PII only",
        access_expiry_date="2026-01-01",
    )
    assert desk.row(OAA, "OAA-00000013")["expires_at"] == "2026-01-01"
    assert desk.row(OAA, "OAA-00000013")["is_temporary"] is False


def test_provision_access_errors(desk: Desk) -> None:
    tool = "okta_api_provision_access"
    assert desk.fails(tool, email="x@vdb.com", app_name="VPN", access_level="user") == (
        "Employee not found in Okta directory: x@vdb.com"
    )
    # Any active grant blocks, whatever its level.
    assert desk.fails(tool, email="marcus.thompson@vdb.com", app_name="Salesforce", access_level="admin") == (
        "Employee already has access to this application: Salesforce"
    )
    assert desk.fails(tool, email="marcus.thompson@vdb.com", app_name="VPN", access_level="root").startswith(
        "Input validation failed: access_level: Input should be 'none', 'read_only', 'read_write',"
    )
    assert desk.fails(
        tool, email="marcus.thompson@vdb.com", app_name="VPN", access_level="user", is_temporary=None
    ) == ("Input validation failed: is_temporary: Input should be a valid boolean")
    assert desk.count(OAA) == 11


def test_provision_access_id_collision_writes_nothing(desk: Desk) -> None:
    # One extra row makes the count 12, so the next id is OAA-00000013 - already taken.
    desk.store.insert(
        OAA,
        {
            "id": "OAA-00000013",
            "employee_id": "WD-294817",
            "app_name": "Okta",
            "access_level": "admin",
            "granted_by": "system",
        },
    )
    assert (
        desk.fails(
            "okta_api_provision_access", email="emma.wilson@vdb.com", app_name="VPN", access_level="user"
        )
        == "Object with ID OAA-00000013 already exists"
    )
    assert desk.count(OAA) == 12


def test_revoke_access_only_flips_is_active(desk: Desk) -> None:
    assert desk.text("okta_api_revoke_access", email="marcus.thompson@vdb.com", app_name="GitHub") == (
        '{"revoked": true}'
    )
    revoked = desk.row(OAA, "OAA-29638471")
    assert revoked["is_active"] is False and revoked["revoked_at"] is None
    assert desk.fails("okta_api_revoke_access", email="marcus.thompson@vdb.com", app_name="GitHub") == (
        "No active access found to revoke for application: GitHub"
    )
    assert (
        desk.fails("okta_api_revoke_access", email="x@vdb.com", app_name="GitHub")
        == "Employee not found: x@vdb.com"
    )
    # Revoked rows still count for the next id.
    first = desk.ok(
        "okta_api_provision_access",
        email="marcus.thompson@vdb.com",
        app_name="GitHub",
        access_level="read_only",
    )
    assert first == {"app_access_id": "OAA-00000012"}
    desk.ok("okta_api_revoke_access", email="marcus.thompson@vdb.com", app_name="GitHub")
    again = desk.ok(
        "okta_api_provision_access",
        email="marcus.thompson@vdb.com",
        app_name="GitHub",
        access_level="read_only",
    )
    assert again == {"app_access_id": "OAA-00000013"}


def test_groups(desk: Desk) -> None:
    assert desk.text("okta_api_get_user_groups", email="marcus.thompson@vdb.com") == (
        '{"groups": [{"group_name": "bi_product_analytics", "added_at": "2025-09-20T11:00:00Z"}, '
        '{"group_name": "engineers", "added_at": "2025-09-15T09:00:00Z"}]}'
    )
    assert desk.text(
        "okta_api_add_to_group", email="marcus.thompson@vdb.com", group_name="bi_marketing_viewers"
    ) == ('{"membership_id": "OGM-00000014"}')
    assert desk.row(OGM, "OGM-00000014") == {
        "id": "OGM-00000014",
        "employee_id": "WD-847291",
        "group_name": "bi_marketing_viewers",
        "added_at": None,
        "added_by": "system",
        "is_active": True,
    }
    groups = desk.ok("okta_api_get_user_groups", email="marcus.thompson@vdb.com")["groups"]
    assert groups[-1] == {"group_name": "bi_marketing_viewers"}
    assert desk.fails("okta_api_add_to_group", email="marcus.thompson@vdb.com", group_name="engineers") == (
        "Employee is already a member of this group: engineers"
    )
    assert (
        desk.fails("okta_api_add_to_group", email="x@vdb.com", group_name="g")
        == "Employee not found: x@vdb.com"
    )
    assert desk.fails("okta_api_get_user_groups", email="x@vdb.com") == "Employee not found: x@vdb.com"


# ---- Okta security actions ----------------------------------------------------------
def test_execute_action_writes_one_audit_row(desk: Desk) -> None:
    reply = desk.text(
        "okta_security_api_execute_action",
        email="marcus.thompson@vdb.com",
        operation="force_password_reset",
        ticket_id="6",
    )
    assert reply == '{"success": true, "audit_id": "OSA-00000011"}'
    row = desk.row(OSA, "OSA-00000011")
    assert row["performed_at"].isoformat() == "2025-12-18T10:00:00+00:00"
    assert {k: v for k, v in row.items() if k != "performed_at"} == {
        "id": "OSA-00000011",
        "employee_id": "WD-847291",
        "operation": "force_password_reset",
        "performed_by": "system",
        "reason": "Security operation: force_password_reset",
        "ticket_id": "6",
        "verification_method": None,
        "success": True,
        "bypass_duration_hours": None,
        "bypass_expires_at": None,
        "mfa_device_id": None,
    }


def test_temporary_bypass_is_computed_from_its_duration(desk: Desk) -> None:
    desk.ok(
        "okta_security_api_execute_action",
        email="kevin.miller@vdb.com",
        operation="set_temporary_bypass",
        bypass_duration_hours=2,
        bypass_expires_at="2030-01-01T00:00:00Z",
        mfa_device_id="MFA-1",
    )
    row = desk.row(OSA, "OSA-00000011")
    assert row["bypass_duration_hours"] == 2
    assert row["bypass_expires_at"].isoformat() == "2025-12-18T12:00:00+00:00"
    assert row["mfa_device_id"] is None
    # Negative durations are accepted.
    desk.ok(
        "okta_security_api_execute_action",
        email="kevin.miller@vdb.com",
        operation="set_temporary_bypass",
        bypass_duration_hours=-1,
    )
    assert desk.row(OSA, "OSA-00000012")["bypass_expires_at"].isoformat() == "2025-12-18T09:00:00+00:00"


def test_mfa_device_id_is_kept_only_for_device_operations(desk: Desk) -> None:
    desk.ok(
        "okta_security_api_execute_action",
        email="emma.wilson@vdb.com",
        operation="add_mfa_device",
        mfa_device_id="MFA-9",
        bypass_duration_hours=3,
    )
    added = desk.row(OSA, "OSA-00000011")
    assert added["mfa_device_id"] == "MFA-9" and added["bypass_duration_hours"] is None
    # A well-formed bypass_expires_at on another operation is checked, then dropped.
    desk.ok(
        "okta_security_api_execute_action",
        email="emma.wilson@vdb.com",
        operation="unlock_account",
        mfa_device_id="MFA-9",
        bypass_expires_at="2025-12-18T14:00:00Z",
    )
    unlocked = desk.row(OSA, "OSA-00000012")
    assert unlocked["mfa_device_id"] is None and unlocked["bypass_expires_at"] is None


def test_execute_action_errors(desk: Desk) -> None:
    tool = "okta_security_api_execute_action"
    who = "emma.wilson@vdb.com"
    assert desk.fails(tool, email="x@vdb.com", operation="unlock_account") == (
        "Employee not found in Okta directory: x@vdb.com"
    )
    assert desk.fails(tool, email=who, operation="remove_mfa_device") == (
        "mfa_device_id is required for remove_mfa_device operation"
    )
    assert desk.fails(tool, email=who, operation="add_mfa_device", mfa_device_id="") == (
        "mfa_device_id is required for add_mfa_device operation"
    )
    assert desk.fails(tool, email=who, operation="set_temporary_bypass") == (
        "bypass_duration_hours is required for set_temporary_bypass operation"
    )
    assert desk.fails(tool, email=who, operation="set_temporary_bypass", bypass_duration_hours=0) == (
        "bypass_duration_hours is required for set_temporary_bypass operation"
    )
    assert desk.fails(tool, email=who, operation="set_temporary_bypass", bypass_duration_hours=5) == (
        "bypass_duration_hours cannot exceed 4 hours"
    )
    assert desk.fails(tool, email=who, operation="unlock_account", bypass_expires_at="not-a-date") == (
        "Failed to execute security action: Invalid isoformat string: 'not-a-date'"
    )
    assert desk.fails(tool, email=who, operation="unlock_account", reason="x") == (
        "Input validation failed: reason: Extra inputs are not permitted"
    )
    assert desk.fails(tool, email=who, operation="reboot").startswith(
        "Input validation failed: operation: Input should be 'send_verification_manager',"
    )
    assert desk.count(OSA) == 10


# ---- security incidents -----------------------------------------------------------
def test_verify_incident_lists_active_incidents_newest_first(desk: Desk) -> None:
    incidents = desk.ok("security_api_verify_incident")["incidents"]
    assert [i["incident_id"] for i in incidents] == [
        "SEC-84752619",
        "SEC-59671283",
        "SEC-43827196",
        "SEC-26184759",
    ]
    assert incidents[0] == {
        "incident_id": "SEC-84752619",
        "severity": "SEV1",
        "description": "Emergency: Unauthorized access attempt to customer PII database",
        "started_at": "2025-09-17T20:00:00+00:00",
        "is_active": True,
    }
    assert desk.fails("security_api_verify_incident", since="today") == (
        "Input validation failed: since: Extra inputs are not permitted"
    )


def _incident(**over: Any) -> dict[str, Any]:
    base = {
        "id": "SEC-00000001",
        "employee_id": "WD-218647",
        "severity": "SEV3",
        "incident_type": "outage",
        "description": "Recently closed",
        "status": "closed",
        "is_active": False,
        "reported_at": "2025-12-17T08:00:00Z",
        "reported_by": "WD-218647",
        "resolved_at": "2025-12-17T10:00:00Z",
    }
    return {**base, **over}


def test_verify_incident_includes_incidents_closed_in_the_last_day(desk: Desk) -> None:
    desk.store.insert(common.SECURITY_INCIDENTS, _incident())
    desk.store.insert(
        common.SECURITY_INCIDENTS, _incident(id="SEC-00000002", resolved_at="2025-12-17T09:59:59Z")
    )
    incidents = desk.ok("security_api_verify_incident")["incidents"]
    assert incidents[0] == {
        "incident_id": "SEC-00000001",
        "severity": "SEV3",
        "description": "Recently closed",
        "started_at": "2025-12-17T08:00:00+00:00",
        "is_active": False,
        "closed_at": "2025-12-17T10:00:00+00:00",
    }
    assert "SEC-00000002" not in [i["incident_id"] for i in incidents]


def test_verify_incident_fails_on_a_naive_resolution_time(desk: Desk) -> None:
    desk.store.insert(common.SECURITY_INCIDENTS, _incident(resolved_at="2025-12-17T12:00:00"))
    assert desk.fails("security_api_verify_incident") == (
        "Failed to retrieve security incidents: can't compare offset-naive and offset-aware datetimes"
    )


# ---- approver look-ups --------------------------------------------------------------
def test_approver_contact(desk: Desk) -> None:
    tool = "approver_lookup_api_get_approver_contact"
    assert desk.text(tool, required_approver="it_security") == (
        '{"employee_id": "WD-753918", "contact_email": "amanda.lee@vdb.com", "contact_name": "Amanda Lee"}'
    )
    assert desk.ok(tool, required_approver="Finance_Accounting")["employee_id"] == "WD-671392"
    assert desk.ok(tool, required_approver="compliance_risk")["employee_id"] == "WD-926473"
    assert desk.fails(tool, required_approver="HR") == (
        "Invalid required_approver: HR. Must be one of: it_security, finance_accounting, compliance_risk"
    )
    assert desk.fails(tool, required_approver="hr", extra=1) == (
        "Input validation failed: extra: Extra inputs are not permitted"
    )


def test_approver_contact_picks_the_first_most_senior_member(desk: Desk) -> None:
    tool = "approver_lookup_api_get_approver_contact"
    same_level = {
        **desk.row(EMP, "WD-753918"),
        "id": "WD-000001",
        "email": "peer@vdb.com",
        "full_name": "Peer",
    }
    desk.store.insert(EMP, same_level)
    assert desk.ok(tool, required_approver="it_security")["employee_id"] == "WD-753918"
    desk.store.update(EMP, "WD-000001", {"level": 7})
    assert desk.ok(tool, required_approver="it_security")["employee_id"] == "WD-000001"
    for emp_id in ("WD-753918", "WD-218647", "WD-000001"):
        desk.store.update(EMP, emp_id, {"department": "it_operations"})
    assert desk.fails(tool, required_approver="it_security") == "No it_security team members found"


def test_contact_details(desk: Desk) -> None:
    tool = "approver_lookup_api_get_contact_details"
    assert desk.text(tool, email="jennifer.brown@vdb.com") == (
        '{"name": "Jennifer Brown", "availability_status": "available"}'
    )
    assert desk.ok(tool, email="kevin.miller@vdb.com") == {
        "name": "Kevin Miller",
        "availability_status": "on_leave",
        "backup_approver_email": "sarah.jones@vdb.com",
    }
    desk.store.update(EMP, "WD-926473", {"employment_status": "terminated"})
    desk.store.update(EMP, "WD-753918", {"employment_status": "departing"})
    assert desk.ok(tool, email="jennifer.brown@vdb.com")["availability_status"] == "unavailable"
    assert desk.ok(tool, email="amanda.lee@vdb.com")["availability_status"] == "available"
    assert desk.fails(tool, email="x@vdb.com") == "Approver not found: x@vdb.com"


# ---- licences ---------------------------------------------------------------------
def test_license_type_and_availability(desk: Desk) -> None:
    assert desk.text("license_management_api_check_license_type", software_name="tableau") == (
        '{"license_type": "standard", "license_id": "LIC-29471863", "annual_cost_per_license": 840}'
    )
    assert desk.text("license_management_api_check_license_type", software_name="SLACK") == (
        '{"license_type": "unlimited", "license_id": "LIC-84726391"}'
    )
    # Inactive allocations do not use a seat.
    assert desk.text("license_management_api_check_availability", software_name="Tableau") == (
        '{"available_licenses": 23, "total_licenses": 25, "license_type": "standard"}'
    )
    assert desk.text("license_management_api_check_availability", software_name="Slack") == (
        '{"license_type": "unlimited"}'
    )
    for tool in ("license_management_api_check_license_type", "license_management_api_check_availability"):
        assert (
            desk.fails(tool, software_name=" Tableau") == "Software not found in license inventory:  Tableau"
        )


def test_allocate_license(desk: Desk) -> None:
    tool = "license_management_api_allocate_license"
    assert desk.text(tool, software_name="looker", email="marcus.thompson@vdb.com") == (
        '{"allocation_id": "LAL-00000009"}'
    )
    assert desk.row(common.LICENSE_ALLOCATIONS, "LAL-00000009") == {
        "id": "LAL-00000009",
        "license_id": "LIC-31854792",
        "employee_id": "WD-847291",
        "allocated_at": None,
        "allocated_by": "system",
        "is_active": True,
        "deallocated_at": None,
    }
    assert (
        desk.ok("license_management_api_check_availability", software_name="Looker")["available_licenses"]
        == 13
    )
    # The pool row itself never changes.
    assert desk.row(common.SOFTWARE_LICENSES, "LIC-31854792")["total_licenses"] == 15
    assert desk.fails(tool, software_name="Looker", email="emma.wilson@vdb.com") == (
        "Employee already has a license for this software: Looker"
    )
    assert (
        desk.fails(tool, software_name="Photoshop", email="emma.wilson@vdb.com")
        == "Software not found: Photoshop"
    )
    assert desk.fails(tool, software_name="Photoshop", email="x@vdb.com") == "Employee not found: x@vdb.com"


def test_allocate_license_capacity(desk: Desk) -> None:
    tool = "license_management_api_allocate_license"
    desk.store.update(common.SOFTWARE_LICENSES, "LIC-31854792", {"total_licenses": 1})
    assert (
        desk.fails(tool, software_name="Looker", email="marcus.thompson@vdb.com")
        == "No licenses available in pool"
    )
    desk.store.update(common.SOFTWARE_LICENSES, "LIC-31854792", {"total_licenses": None})
    assert (
        desk.fails(tool, software_name="Looker", email="marcus.thompson@vdb.com")
        == "No licenses available in pool"
    )
    # Unlimited pools skip the capacity check.
    assert desk.ok(tool, software_name="Slack", email="marcus.thompson@vdb.com") == {
        "allocation_id": "LAL-00000009"
    }


# ---- assets -----------------------------------------------------------------------
def test_employee_devices(desk: Desk) -> None:
    assert desk.text("asset_management_api_get_employee_devices", email="marcus.thompson@vdb.com") == (
        '{"employee_id": "WD-847291", "devices": ['
        '{"asset_id": "VDB-HW-29417", "device_type": "laptop_premium", "device_model": "MacBook Pro 16-inch M2", '
        '"assigned_at": "2023-01-20T10:00:00Z", "condition": "good", "age_months": 35}, '
        '{"asset_id": "VDB-HW-68149", "device_type": "monitor", "device_model": "Dell UltraSharp 27 U2723DE", '
        '"assigned_at": "2023-06-15T10:00:00Z", "condition": "good", "age_months": 30}]}'
    )
    # Inactive assignments are not listed.
    assert desk.ok("asset_management_api_get_employee_devices", email="thomas.white@vdb.com")["devices"] == []
    assert (
        desk.fails("asset_management_api_get_employee_devices", email="x@vdb.com")
        == "Employee not found: x@vdb.com"
    )


def test_employee_devices_fail_after_an_assignment_without_time(desk: Desk) -> None:
    desk.ok("asset_management_api_assign_device", asset_id="VDB-HW-57382", email="marcus.thompson@vdb.com")
    detail = desk.fails("asset_management_api_get_employee_devices", email="marcus.thompson@vdb.com")
    assert detail.startswith(
        "1 validation error for DeviceInfo\nassigned_at\n"
        "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n"
        "    For further information visit https://errors.pydantic.dev/"
    )


def test_device_details(desk: Desk) -> None:
    assert desk.text("asset_management_api_get_device_details", asset_id="VDB-HW-29417") == (
        '{"asset_id": "VDB-HW-29417", "device_type": "laptop_premium", "device_model": "MacBook Pro 16-inch M2", '
        '"purchase_date": "2023-01-15T00:00:00Z", "age_months": 35, "condition": "good", '
        '"warehouse_location": "sf", "is_assigned": true, "assigned_to": "WD-847291"}'
    )
    free = desk.ok("asset_management_api_get_device_details", asset_id="VDB-HW-57382")
    assert free["age_months"] == 33 and free["is_assigned"] is False and "assigned_to" not in free
    assert desk.fails("asset_management_api_get_device_details", asset_id="vdb-hw-29417") == (
        "Asset not found: vdb-hw-29417"
    )
    assert desk.fails("asset_management_api_get_device_details", asset_id="VDB-HW-29417", verbose=True) == (
        "Input validation failed: verbose: Extra inputs are not permitted"
    )


def test_device_age_edge_cases(desk: Desk) -> None:
    tool = "asset_management_api_get_device_details"
    desk.store.update(ASSETS, "VDB-HW-57382", {"purchase_date": "2021-01-15"})  # bare date, taken as UTC
    assert desk.ok(tool, asset_id="VDB-HW-57382")["age_months"] == 59
    desk.store.update(ASSETS, "VDB-HW-57382", {"purchase_date": "2026-02-10T00:00:00Z"})
    # In the future: -55 whole days (floored), then months truncated toward zero.
    assert desk.ok(tool, asset_id="VDB-HW-57382")["age_months"] == -1
    desk.store.update(ASSETS, "VDB-HW-57382", {"purchase_date": "last spring"})
    assert (
        desk.fails(tool, asset_id="VDB-HW-57382")
        == "Invalid purchase_date for asset VDB-HW-57382: 'last spring'"
    )
    desk.store.update(ASSETS, "VDB-HW-57382", {"purchase_date": ""})
    assert desk.fails(tool, asset_id="VDB-HW-57382") == "Invalid purchase_date for asset VDB-HW-57382: ''"


def test_check_inventory(desk: Desk) -> None:
    tool = "asset_management_api_check_inventory"
    assert desk.text(tool, device_type="monitor", warehouse_location="sf") == (
        '{"device_type": "monitor", "warehouse_location": "sf", "available_count": 1, "total_count": 2, '
        '"asset_ids": [{"device_model": "LG UltraWide 34WN80C", "asset_id": "VDB-HW-31854"}]}'
    )
    # Fair/poor devices count in the total but are not available; retired ones are not counted.
    nyc = desk.ok(tool, device_type="laptop_standard", warehouse_location="nyc")
    assert (nyc["available_count"], nyc["total_count"], nyc["asset_ids"]) == (0, 2, [])
    premium = desk.ok(tool, device_type="laptop_premium", warehouse_location="sf")
    assert (premium["available_count"], premium["total_count"]) == (0, 2)
    assert (
        desk.fails(tool, device_type="tablet", warehouse_location="remote") == "Invalid device type: tablet"
    )
    assert (
        desk.fails(tool, device_type="headset", warehouse_location="remote")
        == "Invalid warehouse location: remote"
    )


def test_assign_device(desk: Desk) -> None:
    assert desk.text(
        "asset_management_api_assign_device", asset_id="VDB-HW-57382", email="marcus.thompson@vdb.com"
    ) == ('{"assignment_id": "ASN-00000008", "asset_id": "VDB-HW-57382", "employee_id": "WD-847291"}')
    assert desk.row(ASN, "ASN-00000008") == {
        "id": "ASN-00000008",
        "asset_id": "VDB-HW-57382",
        "employee_id": "WD-847291",
        "assigned_at": None,
        "assigned_by": "system",
        "is_active": True,
        "returned_at": None,
    }
    asset = desk.row(ASSETS, "VDB-HW-57382")
    assert asset["is_assigned"] is True and asset["condition"] == "new"
    # Poor condition is allowed.
    assert desk.ok(
        "asset_management_api_assign_device", asset_id="VDB-HW-92647", email="david.kim@vdb.com"
    ) == {
        "assignment_id": "ASN-00000009",
        "asset_id": "VDB-HW-92647",
        "employee_id": "WD-465782",
    }


def test_assign_device_errors(desk: Desk) -> None:
    tool = "asset_management_api_assign_device"
    assert desk.fails(tool, asset_id="NOPE", email="x@vdb.com") == "Employee not found: x@vdb.com"
    assert desk.fails(tool, asset_id="NOPE", email="david.kim@vdb.com") == "Asset not found: NOPE"
    assert (
        desk.fails(tool, asset_id="VDB-HW-29417", email="david.kim@vdb.com")
        == "Asset VDB-HW-29417 is already assigned"
    )
    assert desk.fails(tool, asset_id="VDB-HW-14725", email="david.kim@vdb.com") == (
        "Cannot assign retired asset: VDB-HW-14725"
    )
    assert desk.count(ASN) == 7


def test_retire_assigned_device_closes_its_assignments(desk: Desk) -> None:
    assert desk.text("asset_management_api_retire_device", asset_id="VDB-HW-29417") == (
        '{"asset_id": "VDB-HW-29417", "previous_condition": "good", "retired_at": "2025-12-17T10:00:00Z", '
        '"was_assigned": true}'
    )
    assignment = desk.row(ASN, "ASN-39471826")
    assert assignment["is_active"] is False and assignment["returned_at"] == "2025-12-17T10:00:00Z"
    asset = desk.row(ASSETS, "VDB-HW-29417")
    assert asset["condition"] == "retired" and asset["is_assigned"] is False
    assert desk.fails("asset_management_api_retire_device", asset_id="VDB-HW-29417") == (
        "Asset VDB-HW-29417 is already retired"
    )
    assert desk.fails("asset_management_api_retire_device", asset_id="NOPE") == "Asset not found: NOPE"


def test_retire_unassigned_device_leaves_stray_assignments(desk: Desk) -> None:
    desk.store.insert(
        ASN,
        {"id": "ASN-STRAY", "asset_id": "VDB-HW-31854", "employee_id": "WD-465782", "assigned_by": "system"},
    )
    reply = desk.ok("asset_management_api_retire_device", asset_id="VDB-HW-31854")
    assert reply["was_assigned"] is False
    assert desk.row(ASN, "ASN-STRAY")["is_active"] is True


# ---- procurement ------------------------------------------------------------------
def test_create_order(desk: Desk) -> None:
    tool = "hardware_procurement_api_create_order"
    args = {
        "device_type": "monitor",
        "device_model": 'Dell P2425H 24"',
        "quantity": 1,
        "expected_delivery_date": "2025-10-15",
        "ship_to_location": "1823 Elm Street, Minneapolis, MN 55401",
        "requester_email": "emma.wilson@vdb.com",
        "ticket_id": "6",
    }
    assert desk.text(tool, **args) == '{"order_id": "HW-ORDER-0000007", "status": "pending"}'
    row = desk.row(common.PROCUREMENT_ORDERS, "HW-ORDER-0000007")
    assert row["expected_delivery_date"].isoformat() == "2025-10-15"
    assert {k: v for k, v in row.items() if k != "expected_delivery_date"} == {
        "id": "HW-ORDER-0000007",
        "device_type": "monitor",
        "device_model": 'Dell P2425H 24"',
        "quantity": 1,
        "ship_to_location": "1823 Elm Street, Minneapolis, MN 55401",
        "requester_id": "WD-192638",
        "ticket_id": "6",
        "status": "pending",
        "created_at": None,
        "delivered_at": None,
    }
    # Only the first ten characters are parsed; quantity is coerced in lax mode.
    desk.ok(tool, **{**args, "expected_delivery_date": "2025-10-16T12:00:00Z", "quantity": "2"})
    second = desk.row(common.PROCUREMENT_ORDERS, "HW-ORDER-0000008")
    assert second["expected_delivery_date"].isoformat() == "2025-10-16" and second["quantity"] == 2


def test_create_order_errors(desk: Desk) -> None:
    tool = "hardware_procurement_api_create_order"
    args = {
        "device_type": "monitor",
        "device_model": "X",
        "quantity": 1,
        "expected_delivery_date": "2025-10-15",
        "ship_to_location": "HQ",
        "requester_email": "emma.wilson@vdb.com",
    }
    assert desk.fails(tool, **{**args, "requester_email": "x@vdb.com"}) == "Requester not found: x@vdb.com"
    assert desk.fails(tool, **{**args, "expected_delivery_date": "10/15/2025"}) == (
        "Invalid expected_delivery_date format: 10/15/2025. Expected YYYY-MM-DD format."
    )
    assert desk.fails(tool, **{**args, "quantity": 2.5}) == (
        "Input validation failed: quantity: Input should be a valid integer, got a number with a fractional part"
    )
    assert desk.fails(tool, **{**args, "device_type": "tablet"}).startswith(
        "Input validation failed: device_type: Input should be 'laptop_standard', 'laptop_premium',"
    )
    assert desk.count(common.PROCUREMENT_ORDERS) == 6


# ---- approvals --------------------------------------------------------------------
def test_create_request_and_check_status(desk: Desk) -> None:
    reply = desk.text(
        "approval_api_create_request",
        request_type="access_request",
        requester_email="emma.wilson@vdb.com",
        approver_email="sarah.jones@vdb.com",
        details="Snowflake read-only",
        ticket_id="6",
    )
    assert reply == '{"approval_request_id": "APR-00000007", "status": "pending"}'
    assert desk.row(common.APPROVAL_REQUESTS, "APR-00000007") == {
        "id": "APR-00000007",
        "request_type": "access_request",
        "requester_id": "WD-192638",
        "approver_id": "WD-681453",
        "status": "pending",
        "urgency": "standard",
        "details": "Snowflake read-only",
        "ticket_id": "6",
        "created_at": None,
        "decided_at": None,
        "approver_feedback": None,
    }
    assert (
        desk.text("approval_api_check_status", approval_request_id="APR-00000007") == '{"status": "pending"}'
    )
    assert desk.text("approval_api_check_status", approval_request_id="APR-19263847") == (
        '{"status": "approved", "decided_at": "2025-09-16T14:00:00Z", '
        '"approver_feedback": "Approved for 30-day access period"}'
    )
    # Requester and approver may be the same person; urgency is kept.
    desk.ok(
        "approval_api_create_request",
        request_type="hardware_purchase",
        requester_email="emma.wilson@vdb.com",
        approver_email="emma.wilson@vdb.com",
        details="d",
        urgency="critical",
    )
    assert desk.row(common.APPROVAL_REQUESTS, "APR-00000008")["urgency"] == "critical"


def test_check_status_prints_the_wall_clock_with_z(desk: Desk) -> None:
    desk.store.update(common.APPROVAL_REQUESTS, "APR-19263847", {"decided_at": "2025-09-16T14:00:00.5+02:00"})
    assert desk.ok("approval_api_check_status", approval_request_id="APR-19263847")["decided_at"] == (
        "2025-09-16T14:00:00Z"
    )
    assert (
        desk.fails("approval_api_check_status", approval_request_id="APR-1")
        == "Approval request not found: APR-1"
    )


def test_create_request_errors(desk: Desk) -> None:
    tool = "approval_api_create_request"
    args = {
        "request_type": "access_request",
        "requester_email": "emma.wilson@vdb.com",
        "approver_email": "sarah.jones@vdb.com",
        "details": "d",
    }
    assert desk.fails(tool, **{**args, "requester_email": "x@vdb.com", "approver_email": "y@vdb.com"}) == (
        "Requester not found: x@vdb.com"
    )
    assert desk.fails(tool, **{**args, "approver_email": "y@vdb.com"}) == "Approver not found: y@vdb.com"
    assert desk.fails(tool, **{**args, "urgency": "high"}) == (
        "Input validation failed: urgency: Input should be 'standard', 'urgent' or 'critical'"
    )
    assert desk.fails(tool, **{**args, "priority": "high"}) == (
        "Input validation failed: priority: Extra inputs are not permitted"
    )
    assert desk.count(common.APPROVAL_REQUESTS) == 6


# ---- notifications ----------------------------------------------------------------
def test_send_notification(desk: Desk) -> None:
    tool = "email_notification_api_send_notification"
    reply = desk.text(
        tool,
        recipient_email="sarah.jones@vdb.com",
        notification_type="post_facto_manager_alert",
        subject="s",
        body="b",
        ticket_id="6",
        priority="urgent",
        cc_emails="b@x, ,a@x ",
    )
    assert reply == '{"notification_id": "NTF-00000007", "delivery_status": "queued"}'
    assert desk.row(common.EMAIL_NOTIFICATIONS, "NTF-00000007") == {
        "id": "NTF-00000007",
        "recipient_id": "WD-681453",
        "recipient_email": "sarah.jones@vdb.com",
        "notification_type": "post_facto_manager_alert",
        "subject": "s",
        "body": "b",
        "ticket_id": "6",
        "priority": "urgent",
        "cc_emails": ["b@x", "", "a@x"],
        "sent_at": None,
        "delivery_status": "queued",
        "delivered_at": None,
        "sent_by": "system",
    }
    # On-leave recipients still get mail; an empty cc list is stored as null; priority defaults to normal.
    desk.ok(
        tool,
        recipient_email="kevin.miller@vdb.com",
        notification_type="ticket_update",
        subject="s",
        body="b",
        cc_emails="",
    )
    second = desk.row(common.EMAIL_NOTIFICATIONS, "NTF-00000008")
    assert second["cc_emails"] is None and second["priority"] == "normal" and second["ticket_id"] is None


def test_send_notification_errors(desk: Desk) -> None:
    tool = "email_notification_api_send_notification"
    args = {
        "recipient_email": "sarah.jones@vdb.com",
        "notification_type": "ticket_update",
        "subject": "s",
        "body": "b",
    }
    assert desk.fails(tool, **{**args, "recipient_email": "x@vdb.com"}) == (
        "Recipient email not found in employee directory: x@vdb.com"
    )
    for status in ("departing", "terminated"):
        desk.store.update(EMP, "WD-681453", {"employment_status": status})
        assert desk.fails(tool, **args) == (
            "Recipient is inactive or on extended leave; notification not sent: sarah.jones@vdb.com"
        )
    assert desk.fails(tool, **{**args, "notification_type": "sms"}).startswith(
        "Input validation failed: notification_type: Input should be 'access_provisioned',"
    )
    assert desk.count(common.EMAIL_NOTIFICATIONS) == 6


# ---- more quirks (spec §5.3) ------------------------------------------------------
def test_revoke_touches_only_the_first_active_duplicate(desk: Desk) -> None:
    desk.store.insert(
        OAA,
        {
            "id": "OAA-DUP",
            "employee_id": "WD-847291",
            "app_name": "GitHub",
            "access_level": "admin",
            "granted_by": "system",
        },
    )
    desk.ok("okta_api_revoke_access", email="marcus.thompson@vdb.com", app_name="GitHub")
    assert desk.row(OAA, "OAA-29638471")["is_active"] is False
    assert desk.row(OAA, "OAA-DUP")["is_active"] is True
    assert desk.ok("okta_api_check_access", email="marcus.thompson@vdb.com", app_name="GitHub") == {
        "has_access": True,
        "access_level": "admin",
    }


def test_names_and_enum_values_are_case_sensitive(desk: Desk) -> None:
    # Group names are free text compared exactly: a differently-cased name is a new group.
    assert desk.ok("okta_api_add_to_group", email="marcus.thompson@vdb.com", group_name="Engineers") == {
        "membership_id": "OGM-00000014"
    }
    assert (
        desk.fails("asset_management_api_check_inventory", device_type="Monitor", warehouse_location="sf")
        == "Invalid device type: Monitor"
    )
    assert (
        desk.fails("asset_management_api_check_inventory", device_type="monitor", warehouse_location="SF")
        == "Invalid warehouse location: SF"
    )
    assert desk.fails(
        "okta_api_provision_access", email="marcus.thompson@vdb.com", app_name="VPN", access_level="Read_Only"
    ).startswith("Input validation failed: access_level: Input should be")


# ---- the neobank Zendesk variant, as served by this server (spec §3.11, §5.3 items 5-7) ----
TICKETS = "zendesk_tickets"
VIOLATIONS = "zendesk_ticket_status_violations"


def test_ticket_create_records_a_status_violation_unless_open(desk: Desk) -> None:
    created = desk.ok("zendesk_create_item", table="tickets", item={"subject": "Laptop", "tags": "B, a ,,c"})[
        "item"
    ]
    assert (created["id"], created["status"], created["tags"]) == ("6", "new", ["", "a", "b", "c"])
    assert (created["created_at"], created["updated_at"]) == ("2025-10-01T13:00:05Z", "2025-10-01T13:00:05Z")
    assert desk.row(VIOLATIONS, "VIOLATION-6") == {
        "id": "VIOLATION-6",
        "ticket_id": "6",
        "created_status": "new",
        "created_at": "2025-10-01T13:00:05Z",
    }
    desk.ok("zendesk_create_item", table="tickets", item={"subject": "VPN", "status": "open"})
    assert desk.count(VIOLATIONS) == 6


def test_ticket_update_ignores_nulls_and_discards_invalid_items(desk: Desk) -> None:
    desk.ok(
        "zendesk_update_item", table="tickets", id="2", item={"status": "hold", "tags": None, "owner": None}
    )
    ticket = desk.row(TICKETS, "2")
    assert (ticket["status"], ticket["tags"], ticket["updated_at"]) == (
        "hold",
        ["system_error"],
        "2025-10-01T13:00:10Z",
    )
    # An invalid ticket field makes the whole item lose: the call succeeds, only updated_at moves.
    desk.ok("zendesk_update_item", table="tickets", id="1", item={"status": "bogus", "priority": "low"})
    first = desk.row(TICKETS, "1")
    assert (first["status"], first["priority"], first["updated_at"]) == (
        "open",
        "high",
        "2025-10-01T13:00:10Z",
    )
    assert desk.count(VIOLATIONS) == 5


def test_odata_filter_subset(desk: Desk) -> None:
    def ids(flt: str) -> list[str]:
        return [i["id"] for i in desk.ok("zendesk_get_items", table="tickets", **{"$filter": flt})["items"]]

    assert ids("status ne 'open'") == ["2", "3", "4"]
    assert ids("priority eq 'high' and status eq 'open'") == ["1", "5"]
    assert ids("requester_id eq 3") == []  # ids are strings
    assert ids("contains(subject, 'x')") == ["1", "2", "3", "4", "5"]  # unsupported nodes filter nothing
    users = desk.ok("zendesk_get_items", table="users", **{"$filter": "verified eq true"})["items"]
    assert users == []  # boolean literals compare as text
    assert desk.fails("zendesk_get_items", table="tickets", **{"$filter": "id gt 3"}) == (
        "Failed to parse OData filter: '>' not supported between instances of 'str' and 'int'"
    )


# ---- a held-out task's golden end state --------------------------------------------
def test_held_out_ie_001_worked_example(
    benchmark: Benchmark, make_database: Callable[[str], psycopg.Connection[Any]]
) -> None:
    """spec §5.2: the SEV1 incident access grant and its two notifications."""
    task_id = "sandbox_neobank_support_v1_group1.py:test_ie_001"
    replay = replay_domain(
        make_database("neobank_ie_001"), benchmark, "neobank", wanted=[task_id], keep_states=True
    )
    [run] = replay.tasks
    assert (run.task_id, run.traced, run.problems) == (task_id, False, [])
    final = run.final
    assert final is not None
    access = {r["id"]: r for r in final["sandbox_neobank_support_main_models_okta_app_access"]}
    assert access["OAA-00000012"] == {
        "id": "OAA-00000012",
        "employee_id": "WD-637182",
        "app_name": "Production database",
        "access_level": "read_only",
        "granted_at": None,
        "granted_by": "system",
        "is_active": True,
        "revoked_at": None,
        "is_temporary": True,
        "expires_at": "2025-10-02T13:00:00Z",
    }
    notes = {r["id"]: r for r in final["sandbox_neobank_support_main_models_email_notifications"]}
    expected = {
        "NTF-00000007": ("post_facto_manager_alert", "WD-681453"),
        "NTF-00000008": ("incident_access_granted", "WD-753918"),
    }
    for note_id, (kind, recipient) in expected.items():
        note = notes[note_id]
        assert (note["notification_type"], note["recipient_id"]) == (kind, recipient)
        assert note["priority"] == "urgent" and note["ticket_id"] == "6" and note["cc_emails"] is None
        assert note["sent_at"] is None and note["delivery_status"] == "queued" and note["sent_by"] == "system"
    # The patch replaced a seed employee in place (store order kept).
    assert run.initial is not None
    employees = run.initial["sandbox_neobank_support_main_models_employees"]
    sarah = next(e for e in employees if e["id"] == "WD-681453")
    assert (sarah["role"], sarah["manager_id"]) == ("VP of Engineering", "WD-524893")
