"""The tool marking (servers/engine/marking.py): its rules, multi-action tools,
agreement with the export's observed `writes_state`, and the annotations the
domain servers list (names and schemas untouched)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from servers.engine.app import DomainRuntime, build_mcp_server
from servers.engine.marking import READ, READ_BY_SPEC, Marking, mark, mark_call, mark_phrase, mark_tool
from servers.registry import domain_names, load_domain

WRITE = Marking(read_only=False, destructive=False, idempotent=False)
UPDATE = Marking(read_only=False, destructive=False, idempotent=True)
DESTRUCTIVE = Marking(read_only=False, destructive=True, idempotent=False)


@pytest.mark.parametrize(
    ("phrase", "marking"),
    [
        ("get_order", READ),
        ("booking_api_check_hotel_availability", READ),
        ("knowledge_base_search_policy", READ),
        ("lookup_lookup_hotel_id", READ),
        ("crm_verify_identity", READ),
        ("payment_api_check_payment_status", READ),  # names money, but reads
        ("okta_api_check_access", READ),  # names access, but reads
        ("create_rma", WRITE),
        ("zendesk_create_item", WRITE),
        ("email_notification_api_send_notification", WRITE),
        ("booking_api_modify_group_booking", WRITE),  # "group" alone is no access grant
        ("billing_grant_extension", WRITE),  # "grant" alone neither
        ("some_new_verb_thing", WRITE),  # unknown: a write, MCP's default
        ("update_shipping_speed", UPDATE),
        ("reschedule_installation", UPDATE),
        ("policy_reinstate_policy", UPDATE),
        ("create_refund", DESTRUCTIVE),
        ("payment_api_process_charge", DESTRUCTIVE),
        ("charge_customer", DESTRUCTIVE),
        ("cancel_order", DESTRUCTIVE),
        ("policy_schedule_cancellation", DESTRUCTIVE),
        ("zendesk_delete_item", DESTRUCTIVE),
        ("asset_management_api_retire_device", DESTRUCTIVE),
        ("okta_api_revoke_access", DESTRUCTIVE),
        ("okta_provision_access", DESTRUCTIVE),
        ("okta_api_add_to_group", DESTRUCTIVE),
        ("grant_folder_access", DESTRUCTIVE),
        ("unlock_account", DESTRUCTIVE),
        ("force_password_reset", DESTRUCTIVE),
    ],
)
def test_phrase_rules(phrase: str, marking: Marking) -> None:
    assert mark_phrase(phrase) == marking


SCHEMA = {
    "type": "object",
    "properties": {"action": {"type": "string", "enum": ["get_device", "assign_device", "retire_device"]}},
}


def test_a_multi_action_tool_is_the_union_and_a_call_is_its_action() -> None:
    assert mark("asset_api", SCHEMA) == DESTRUCTIVE  # some action is
    assert mark_call("asset_api", SCHEMA, {"action": "get_device"}) == READ
    assert mark_call("asset_api", SCHEMA, {"action": "assign_device"}) == WRITE
    assert mark_call("asset_api", SCHEMA, {"action": "retire_device"}) == DESTRUCTIVE
    # no action, or one the enum does not have: the tool's own (cautious) marking
    for args in (None, {}, {"action": "get_everything"}, {"action": 3}):
        assert mark_call("asset_api", SCHEMA, args) == DESTRUCTIVE
    reads = {"type": "object", "properties": {"action": {"enum": ["get_a", "check_b"]}}}
    assert mark("x_api", reads) == READ
    # a tool without a selector: its name, whatever the arguments
    assert mark_call("create_refund", {"type": "object"}, {"action": "get_x"}) == DESTRUCTIVE


def test_the_servers_multi_action_tools_mark_each_action() -> None:
    okta = load_domain("neobank").tool("okta_security_api_execute_action")
    membership = load_domain("retail").tool("update_membership_status")
    assert okta is not None and membership is not None
    assert mark_tool(okta).destructive and mark_tool(membership).destructive
    assert mark_call(okta.name, okta.input_schema, {"operation": "send_verification_sms"}) == WRITE
    assert mark_call(okta.name, okta.input_schema, {"operation": "remove_mfa_device"}).destructive
    assert mark_call(membership.name, membership.input_schema, {"action": "upgrade"}) == WRITE
    assert mark_call(membership.name, membership.input_schema, {"action": "cancel"}).destructive


def test_read_by_spec_is_small_and_each_entry_is_needed() -> None:
    tools = {t.name: t for d in domain_names() for t in load_domain(d).tools}
    assert len(READ_BY_SPEC) <= 5
    for name in READ_BY_SPEC:
        assert name in tools, name  # no stale entry
        assert not mark_phrase(name).read_only, f"{name}: the rules mark it read-only already"
        assert mark_tool(tools[name]) == READ


@pytest.mark.parametrize("name", domain_names())
def test_marking_agrees_with_the_export_writes_state(name: str, dataset: Path) -> None:
    # the export observed, per tool, whether its golden calls changed state (None: never called)
    domain = load_domain(name)
    ref = json.loads((dataset / "servers" / domain.module / "tools.json").read_text())["agent_tools"]
    observed = {t["name"]: t.get("writes_state") for t in ref}
    for t in domain.tools:
        m = mark_tool(t)
        if observed[t.name] is True:
            assert not m.read_only, t.name
        elif observed[t.name] is False:
            # a tool whose golden calls never wrote is read-only, or a multi-action tool
            # whose golden calls used only its reads
            assert m.read_only or any(mark_phrase(v).read_only for v in _actions(t.input_schema)), t.name


def _actions(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties") or {}
    return [v for k in ("action", "operation") for v in (props.get(k) or {}).get("enum") or []]


def listed_tools(domain: str) -> list[types.Tool]:
    server = build_mcp_server(DomainRuntime(load_domain(domain), dsn="postgresql://unused"))

    async def go() -> list[types.Tool]:
        from mcp import Client

        async with Client(server) as client:
            return list((await client.list_tools()).tools)

    return anyio.run(go)


@pytest.mark.parametrize("name", domain_names())
def test_the_servers_list_the_marking_as_annotations_and_nothing_else_changes(name: str) -> None:
    domain = load_domain(name)
    listed = listed_tools(name)
    assert [t.name for t in listed] == [t.name for t in domain.tools]
    for ours, tool in zip(domain.tools, listed, strict=True):
        assert tool.input_schema == ours.input_schema and tool.description == ours.description
        m = mark_tool(ours)
        assert tool.annotations == types.ToolAnnotations(
            read_only_hint=m.read_only, destructive_hint=m.destructive, idempotent_hint=m.idempotent
        )
        dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert set(dumped) == {"name", "description", "inputSchema", "annotations"}
        assert set(dumped["annotations"]) == {"readOnlyHint", "destructiveHint", "idempotentHint"}
