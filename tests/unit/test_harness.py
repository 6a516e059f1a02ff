"""Harness interventions' pure parts: the names (models config, --harness),
the bundle hash, and error-hints' categories on the servers' own error texts
(bench.rollout.harness)."""

from __future__ import annotations

import json

import pytest

from bench.llm.config import ModelsConfigError, parse_models_config
from bench.rollout.harness.error_hints import UNCLASSIFIED, annotate, categorize
from bench.rollout.harness.hook import tool_message
from bench.rollout.harness.names import HarnessError, parse_harness
from bench.rollout.trajectory import ToolCall
from bench.run.output import bundle_hash
from servers.engine.tools import error_reply

# error texts as the domain servers and the proxy produce them (servers/*/tools, sandbox/proxy)
CASES = [
    ("Customer", "No customer found with email 'a@b.c'", "not_found"),
    ("Item", "Item with ID 'X1' not found in table 'TableName.tickets'", "not_found"),
    ("Promo", "Promotion code not found or expired: SPRING", "not_found"),
    ("Catalog", "No matching software found in catalog for: Visio", "not_found"),
    ("Input", "Input validation failed: order_id: Field required", "invalid_arguments"),
    ("VIN", "Invalid VIN format. VIN must be exactly 17 characters.", "invalid_arguments"),
    ("Either", "Either customer_id or booking_reference must be provided", "invalid_arguments"),
    ("Missing", "Missing required parameter: policy_id", "invalid_arguments"),
    ("Dup", "VIN '1HGCM82633A004352' already exists on this policy", "precondition_not_met"),
    ("Assoc", "Booking is not associated with this corporate account.", "precondition_not_met"),
    ("Stock", "No available laptop devices at Chicago", "precondition_not_met"),
    ("Immutable", "The value is not updatable. Ticket comments cannot be modified.", "not_permitted"),
    ("Denied", "Permission denied: approver lacks the role", "not_permitted"),
    ("Down", "Service temporarily unavailable", "transient"),
    ("Timeout", "the call timed out after 30 s", "transient"),
    ("Odd", "list index out of range", UNCLASSIFIED),
]


@pytest.mark.parametrize(("label", "message", "category"), CASES, ids=[c[0] for c in CASES])
def test_categories_of_server_errors(label: str, message: str, category: str) -> None:
    assert categorize(error_reply("some_tool", message)) == category


def test_annotate_keeps_the_reply_and_records_the_hint_beside_it() -> None:
    reply = error_reply("get_order", "Input validation failed: order_id: Field required")
    call = ToolCall(index=0, tool="get_order", result=reply, error_envelope=True)
    seen = tool_message(("error-hints",), call)
    assert call.result == reply  # byte-identical
    assert call.hint == "invalid_arguments"
    assert seen.startswith(reply) and "[tbx error hint] invalid arguments:" in seen[len(reply) :]
    ok = ToolCall(index=1, tool="get_order", result=json.dumps({"order_id": "ORD-1"}))
    assert tool_message(("error-hints",), ok) == ok.result and ok.hint is None
    odd = ToolCall(index=2, tool="x", result="Error: list index out of range", is_error=True)
    assert annotate(odd) == odd.result and odd.hint == UNCLASSIFIED
    # off: the reply as it is, nothing recorded
    plain = ToolCall(index=3, tool="get_order", result=reply, error_envelope=True)
    assert tool_message((), plain) == reply and plain.hint is None


def test_names_parse_and_refuse_clearly() -> None:
    assert parse_harness(None) == () and parse_harness("") == ()
    assert parse_harness("error-hints, error-hints") == ("error-hints",)
    assert parse_harness(["error-hints"]) == ("error-hints",)
    with pytest.raises(HarnessError, match=r"unknown harness 'retry'.*error-hints"):
        parse_harness("retry")
    with pytest.raises(HarnessError, match="'approval' is not implemented yet"):
        parse_harness("approval")


def test_models_config_harness_is_validated_and_public_only_when_on() -> None:
    base = {"agent": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}}
    plain = parse_models_config(base)
    assert plain.harness == () and "harness" not in plain.public_dict()
    on = parse_models_config({**base, "harness": ["error-hints"]})
    assert on.harness == ("error-hints",) and on.public_dict()["harness"] == ["error-hints"]
    with pytest.raises(ModelsConfigError, match=r"harness.*unknown harness 'nope'"):
        parse_models_config({**base, "harness": "nope"})


def test_bundle_hash_changes_with_a_harness_and_not_without() -> None:
    manifest = {
        "git_commit": "c",
        "dataset_hash": "d",
        "image_digests": {},
        "agent": "oracle",
        "config": None,
        "policy_search": "hybrid",
    }
    plain = bundle_hash(manifest)
    assert bundle_hash({**manifest, "harness": []}) == plain  # a run without one hashes as before
    assert bundle_hash({**manifest, "harness": ["error-hints"]}) != plain
