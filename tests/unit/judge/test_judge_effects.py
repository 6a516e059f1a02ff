"""Effects and labelled differences: rows matched by key (never position),
id-less tables, composite keys, integer ids as text, unstable fields; and the
effects of every sampled traced task equal the trace's golden_delta."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from bench.dataset import load_benchmark
from bench.prepare import initial_state
from judge import (
    Effects,
    State,
    StateShapeError,
    canonical_state,
    compute_effects,
    golden_differences,
    state_hash,
)
from servers.engine.schema import f, table
from servers.registry import load_domain

ITEMS = table(
    "items", "id", [f("id", "str"), f("name", "str"), f("qty", "int"), f("note", "str", unstable=True)]
)
STOCK = table("stock", "sku", [f("sku", "str"), f("level", "int")])  # no `id`: keeps insertion order
NDA = table(
    "nda",
    ("email", "client"),
    [f("email", "str"), f("client", "str"), f("status", "str")],
    key_format="{email}:{client}",
)
ARTICLES = table("articles", "id", [f("id", "int"), f("title", "str")])
TABLES = [ITEMS, STOCK, NDA, ARTICLES]


def state(**tables: list[dict[str, Any]]) -> State:
    out: State = {t.name: [] for t in TABLES}
    out.update(tables)
    return out


def summary(effects: Effects) -> dict[str, Any]:
    return {
        name: {
            "inserted": [e.key for e in t.inserted],
            "updated": {e.key: (e.before, e.after) for e in t.updated},
            "deleted": [e.key for e in t.deleted],
        }
        for name, t in effects.tables.items()
    }


def test_rows_are_matched_by_key_not_position() -> None:
    before = state(stock=[{"sku": "A", "level": 1}, {"sku": "B", "level": 2}])
    # Same rows, other order: nothing changed.
    assert compute_effects(
        TABLES, before, state(stock=[{"sku": "B", "level": 2}, {"sku": "A", "level": 1}])
    ).empty
    # B deleted and C appended where B was: one delete, one insert, no update of "position 2".
    after = state(stock=[{"sku": "A", "level": 1}, {"sku": "C", "level": 2}])
    assert summary(compute_effects(TABLES, before, after)) == {
        "stock": {"inserted": ["C"], "updated": {}, "deleted": ["B"]}
    }


def test_updates_carry_only_changed_fields() -> None:
    before = state(items=[{"id": "1", "name": "a", "qty": 1}, {"id": "2", "name": "b", "qty": 2}])
    after = state(items=[{"id": "1", "name": "a", "qty": 5}, {"id": "2", "name": "b", "qty": 2}])
    assert summary(compute_effects(TABLES, before, after)) == {
        "items": {"inserted": [], "updated": {"1": ({"qty": 1}, {"qty": 5})}, "deleted": []}
    }


def test_composite_and_integer_keys() -> None:
    before = state(
        nda=[
            {"email": "a@x", "client": "C1", "status": "signed"},
            {"email": "a@x", "client": "C2", "status": "signed"},
        ],
        articles=[{"id": 7, "title": "t"}, {"id": 10, "title": "u"}],
    )
    after = state(
        nda=[
            {"email": "a@x", "client": "C2", "status": "expired"},
            {"email": "a@x", "client": "C1", "status": "signed"},
        ],
        articles=[{"id": 10, "title": "u"}, {"id": 11, "title": "v"}],
    )
    eff = compute_effects(TABLES, before, after)
    assert summary(eff) == {
        "nda": {
            "inserted": [],
            "updated": {"a@x:C2": ({"status": "signed"}, {"status": "expired"})},
            "deleted": [],
        },
        "articles": {"inserted": ["11"], "updated": {}, "deleted": ["7"]},
    }
    assert eff.tables["articles"].inserted[0].after == {"id": 11, "title": "v"}
    assert eff.tables["articles"].deleted[0].before == {"id": 7, "title": "t"}


def test_unstable_fields_never_count() -> None:
    raw_before = {"items": [{"id": "1", "name": "a", "qty": 1, "note": "x"}]}
    raw_after = {"items": [{"id": "1", "name": "a", "qty": 1, "note": "changed"}]}
    before, after = canonical_state(TABLES, raw_before), canonical_state(TABLES, raw_after)
    assert "note" not in before["items"][0]
    assert compute_effects(TABLES, before, after).empty


def test_bad_states_are_rejected() -> None:
    with pytest.raises(StateShapeError, match="two rows with key"):
        compute_effects(TABLES, state(), state(stock=[{"sku": "A", "level": 1}, {"sku": "A", "level": 2}]))
    with pytest.raises(StateShapeError, match="does not declare: other"):
        compute_effects(TABLES, state(), {**state(), "other": []})
    with pytest.raises(StateShapeError, match="no key field"):
        compute_effects(TABLES, state(), state(stock=[{"level": 1}]))


def labels(diffs: list[Any]) -> set[tuple[Any, ...]]:
    return {
        (d.kind, d.op, d.table, d.key, d.field, json.dumps(d.expected), json.dumps(d.actual)) for d in diffs
    }


INITIAL = state(
    items=[
        {"id": "1", "name": "a", "qty": 1},
        {"id": "2", "name": "b", "qty": 2},
        {"id": "3", "name": "c", "qty": 3},
    ],
    stock=[{"sku": "A", "level": 1}],
)


def test_difference_kinds() -> None:
    # golden: item 1 qty -> 10, item 3 deleted, item 4 inserted, stock B appended
    golden = state(
        items=[
            {"id": "1", "name": "a", "qty": 10},
            {"id": "2", "name": "b", "qty": 2},
            {"id": "4", "name": "d", "qty": 4},
        ],
        stock=[{"sku": "A", "level": 1}, {"sku": "B", "level": 5}],
    )
    # attempt: item 1 untouched (missing update), item 2 renamed (extra update), item 3 kept
    # (missing delete), item 4 inserted with a wrong qty, item 5 inserted (extra), stock B missing
    # (missing insert), stock A deleted (extra delete)
    terminal = state(
        items=[
            {"id": "1", "name": "a", "qty": 1},
            {"id": "2", "name": "z", "qty": 2},
            {"id": "3", "name": "c", "qty": 3},
            {"id": "4", "name": "d", "qty": 40},
            {"id": "5", "name": "e", "qty": 5},
        ],
        stock=[],
    )
    got = labels(golden_differences(TABLES, INITIAL, terminal, golden))
    row3, row5 = {"id": "3", "name": "c", "qty": 3}, {"id": "5", "name": "e", "qty": 5}
    assert got == {
        ("missing_effect", "update", "items", "1", "qty", "10", "1"),
        ("extra_effect", "update", "items", "2", "name", '"b"', '"z"'),
        ("missing_effect", "delete", "items", "3", None, "null", json.dumps(row3)),
        ("wrong_value", None, "items", "4", "qty", "4", "40"),
        ("extra_effect", "insert", "items", "5", None, "null", json.dumps(row5)),
        ("extra_effect", "delete", "stock", "A", None, json.dumps({"sku": "A", "level": 1}), "null"),
        ("missing_effect", "insert", "stock", "B", None, json.dumps({"sku": "B", "level": 5}), "null"),
    }


def test_wrong_value_when_both_changed_a_field_differently() -> None:
    golden = state(items=[{"id": "1", "name": "a", "qty": 10}, *INITIAL["items"][1:]], stock=INITIAL["stock"])
    terminal = state(
        items=[{"id": "1", "name": "a", "qty": 11}, *INITIAL["items"][1:]], stock=INITIAL["stock"]
    )
    (d,) = golden_differences(TABLES, INITIAL, terminal, golden)
    assert (d.kind, d.table, d.key, d.field, d.expected, d.actual) == (
        "wrong_value",
        "items",
        "1",
        "qty",
        10,
        11,
    )
    assert d.describe() == "wrong value items[1].qty: expected 10, got 11"


def test_row_order_and_no_difference() -> None:
    golden = state(
        items=INITIAL["items"],
        stock=[{"sku": "A", "level": 1}, {"sku": "B", "level": 1}, {"sku": "C", "level": 1}],
    )
    terminal = state(
        items=INITIAL["items"],
        stock=[{"sku": "A", "level": 1}, {"sku": "C", "level": 1}, {"sku": "B", "level": 1}],
    )
    (d,) = golden_differences(TABLES, INITIAL, terminal, golden)
    assert (d.kind, d.table, d.expected, d.actual) == ("row_order", "stock", ["A", "B", "C"], ["A", "C", "B"])
    assert golden_differences(TABLES, INITIAL, golden, golden) == []
    # Order is compared over the rows both hold, next to other differences.
    terminal = state(items=INITIAL["items"], stock=[{"sku": "C", "level": 2}, {"sku": "A", "level": 1}])
    got = [
        (d.kind, d.key, d.field, d.expected, d.actual)
        for d in golden_differences(TABLES, INITIAL, terminal, golden)
    ]
    assert got == [
        ("missing_effect", "B", None, {"sku": "B", "level": 1}, None),
        ("wrong_value", "C", "level", 1, 2),
        ("row_order", None, None, ["A", "C"], ["C", "A"]),
    ]


@pytest.fixture(scope="module")
def traced(dataset: Path) -> list[tuple[Any, State, State, dict[str, Any]]]:
    """Every 8th traced task of each domain: (task, initial, golden, trace golden_delta)."""
    bench = load_benchmark(dataset, strict=False)
    out = []
    for path in sorted((dataset / "traces").glob("*.jsonl")):
        for i, line in enumerate(path.read_text().splitlines()):
            if i % 8:
                continue
            tr = json.loads(line)
            task = bench.task(tr["task_id"])
            tables = load_domain(task.domain).tables
            initial = canonical_state(tables, initial_state(bench, task))
            assert state_hash(initial) == tr["initial_state_hash"]
            gz = dataset / "traces/canonical_states" / (task.id.replace(":", "__") + ".json.gz")
            golden = json.loads(gzip.decompress(gz.read_bytes()))
            out.append((task, initial, golden, tr["golden_delta"]))
    return out


def test_effects_equal_the_reference_golden_delta(
    traced: list[tuple[Any, State, State, dict[str, Any]]],
) -> None:
    assert len({t.domain for t, *_ in traced}) == 5
    for task, initial, golden, delta in traced:
        eff = compute_effects(load_domain(task.domain).tables, initial, golden)
        ours = {
            name: {
                "inserted": [e.after for e in te.inserted],
                "updated": [{"key": e.key, "before": e.before, "after": e.after} for e in te.updated],
                "deleted": [e.before for e in te.deleted],
            }
            for name, te in eff.tables.items()
        }

        def norm(d: dict[str, Any]) -> dict[str, Any]:
            return {
                t: {k: sorted(v, key=lambda r: json.dumps(r, sort_keys=True)) for k, v in parts.items()}
                for t, parts in d.items()
            }

        assert norm(ours) == norm(delta), task.id


def test_a_nan_read_twice_is_no_change() -> None:
    # Two reads of a stored NaN are two floats `==` never calls equal; the hash sees one value.
    table_ = table("m", "id", [f("id", "str"), f("x", "float")])
    before = {"m": [{"id": "1", "x": float("nan")}]}
    after = {"m": [{"id": "1", "x": float("nan")}]}
    assert compute_effects([table_], before, after).empty
    assert golden_differences([table_], before, after, before) == []
    changed = {"m": [{"id": "1", "x": 2.0}]}
    assert compute_effects([table_], before, changed).counts() == {
        "m": {"inserted": 0, "updated": 1, "deleted": 0}
    }
