"""Non-finite numbers (NaN, the infinities, literals that overflow a float) are
refused wherever a number enters a domain's state: every tool's input, whatever
the nesting, with the ordinary input-validation reply; and every table row, so a
seed or data_patch row and a row a tool writes are refused too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from servers.engine.rows import validate_row
from servers.engine.schema import TableSpec
from servers.engine.seeding import DataPatchError, initial_rows, validated_patch
from servers.engine.tools import ERROR_PREFIX, Tool, ToolContext, run_tool
from servers.registry import domain_names, load_domain

NON_FINITE = ["NaN", "Infinity", "-inf", "1e999", float("nan"), float("-inf")]
FINITE_MESSAGE = "Input should be a finite number"


def _is_number(node: dict[str, Any]) -> bool:
    return node.get("type") == "number" or any(o.get("type") == "number" for o in node.get("anyOf", []))


def _placeholder(node: dict[str, Any]) -> Any:
    if "enum" in node:
        return node["enum"][0]
    kind = node.get("type") or next((o.get("type") for o in node.get("anyOf", []) if o.get("type")), "string")
    return {"string": "x", "integer": 1, "boolean": True, "object": {}, "array": []}.get(kind, "x")


def _number_paths(node: dict[str, Any], value: Any) -> Iterator[tuple[str, Any]]:
    """(dotted path, arguments holding `value` at that number field, the object's other
    required fields filled) for every number field. Unions of objects are left to a test
    of their own: an all-optional alternative takes the value as an ignored extra key."""
    if _is_number(node):
        yield "", value
        return
    props = node.get("properties", {})
    required = {k: _placeholder(props[k]) for k in node.get("required", []) if k in props}
    for name, child in props.items():
        for path, inner in _number_paths(child, value):
            yield (f"{name}.{path}" if path else name), {**required, name: inner}
    if isinstance(node.get("items"), dict):
        for path, inner in _number_paths(node["items"], value):
            yield path, [inner]


def _cases() -> Iterator[Any]:
    for name in domain_names():
        for t in load_domain(name).tools:
            for path, args in _number_paths(t.input_schema, "NaN"):
                yield pytest.param(t, args, id=f"{name}:{t.name}:{path}")


CASES = list(_cases())


def test_the_domains_have_number_inputs() -> None:
    # The walk finds them (a broken walk would pass vacuously).
    assert {"retail:create_refund:amount", "retail:charge_customer:amount"} <= {c.id for c in CASES}


@pytest.mark.parametrize(("tool", "args"), CASES)
def test_every_number_input_refuses_nan(tool: Tool, args: dict[str, Any]) -> None:
    # Validation runs before the database is touched: no store is needed to refuse.
    reply = json.loads(run_tool(tool, ToolContext(db=None), args))  # type: ignore[arg-type]
    assert set(reply) == {"error", "tool"} and reply["tool"] == tool.name
    assert reply["error"].startswith(ERROR_PREFIX + "Input validation failed: ")
    assert FINITE_MESSAGE in reply["error"]


def test_a_zendesk_item_refuses_a_non_finite_custom_number() -> None:
    create = load_domain("travel").tool("zendesk_create_item")
    assert create is not None
    args = {"table": "tickets", "item": {"subject": "s", "refund_amount": "NaN"}}
    reply = json.loads(run_tool(create, ToolContext(db=None), args))  # type: ignore[arg-type]
    assert f"item.TicketCreateInput.refund_amount: {FINITE_MESSAGE}" in reply["error"]


def _float_table() -> tuple[TableSpec, str, dict[str, Any]]:
    """A retail table with a float field, and one valid row of it (from its seed)."""
    from servers.domains.retail.common import REFUNDS
    from servers.domains.retail.domain import DOMAIN

    spec = next(t for t in DOMAIN.tables if t.name == REFUNDS)
    row = {
        "id": "RFD-9",
        "transaction_id": "TXN-10000001",
        "order_id": "ORD-10000001",
        "amount": 1.5,
        "refund_reason": "order_cancelled",
        "status": "pending",
        "refund_date": "2025-10-01T13:00:05Z",
    }
    return spec, "amount", row


@pytest.mark.parametrize("value", NON_FINITE)
def test_a_row_refuses_non_finite_floats(value: Any) -> None:
    spec, field, row = _float_table()
    validate_row(spec, row)  # the row itself is valid
    with pytest.raises(ValidationError, match=FINITE_MESSAGE):
        validate_row(spec, {**row, field: value})


def test_a_row_refuses_non_finite_decimals() -> None:
    spec = load_domain("travel").tables
    decimal_field = next((t, f.name) for t in spec for f in t.fields if f.kind == "decimal")
    table, name = decimal_field
    with pytest.raises(ValidationError) as info:
        validate_row(table, {name: "NaN"})
    assert any(e["loc"] == (name,) and e["msg"] == FINITE_MESSAGE for e in info.value.errors())


@pytest.mark.parametrize("value", NON_FINITE)
def test_a_data_patch_row_with_a_non_finite_number_is_refused(value: Any) -> None:
    spec, field, row = _float_table()
    with pytest.raises(DataPatchError) as info:
        validated_patch([spec], {spec.name: [{**row, field: value}]})
    assert str(info.value) == (
        f"Data patch validation failed: Validation error for table '{spec.name}': {field}: {FINITE_MESSAGE}"
    )


def test_a_seed_row_with_a_non_finite_number_is_refused() -> None:
    spec, field, row = _float_table()
    with pytest.raises(DataPatchError, match=FINITE_MESSAGE):
        initial_rows([spec], {spec.name: [{**row, field: "NaN"}]}, None)
