"""The effects diff of an attempt against the golden end state, by table and
primary key, built from the verdict's labelled differences (which carry the
expected and the got values) and, for context, the attempt's terminal rows.

A row appears once per (table, key): as a whole row (an unexpected insert or
delete, a required row missing, a row golden deleted and the attempt kept) or
as its field differences (wrong value, unexpected update, missing update).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from judge import Difference, State
from servers.engine.schema import TableSpec

# (kind, op) -> what it means for the row, in the reader's words
WHOLE_ROW: dict[tuple[str, str | None], str] = {
    ("extra_effect", "insert"): "unexpected insert",
    ("extra_effect", "delete"): "unexpected delete",
    ("missing_effect", "insert"): "required row missing",
    ("missing_effect", "delete"): "row not deleted",
}
FIELD: dict[tuple[str, str | None], str] = {
    ("wrong_value", None): "wrong value",
    ("extra_effect", "update"): "unexpected update",
    ("missing_effect", "update"): "missing update",
}


def label(d: Difference) -> str:
    """A difference without its row key, so that attempts can be counted by it:
    `wrong value orders.status`, `required row missing refunds`."""
    if d.kind == "row_order":
        return f"row order {d.table}"
    what = WHOLE_ROW.get((d.kind, d.op)) or FIELD.get((d.kind, d.op)) or f"{d.kind} {d.op or ''}".strip()
    return f"{what} {d.table}" + (f".{d.field}" if d.field else "")


class FieldDiff(BaseModel):
    field: str
    what: str  # wrong value | unexpected update | missing update
    expected: Any = None
    got: Any = None


class RowDiff(BaseModel):
    key: str
    what: str  # a WHOLE_ROW label, or "field differences"
    row: dict[str, Any] | None = None  # the whole row, for whole-row differences
    fields: list[FieldDiff] = Field(default_factory=list)
    # the attempt's terminal row (field differences only, when the state was readable)
    got_row: dict[str, Any] | None = None


class TableDiff(BaseModel):
    table: str
    rows: list[RowDiff] = Field(default_factory=list)
    order_expected: list[Any] | None = None
    order_got: list[Any] | None = None

    def counts(self) -> dict[str, int]:
        """How many of each kind: whole rows count once, field differences per field."""
        out: dict[str, int] = {}
        for r in self.rows:
            for what in [f.what for f in r.fields] or [r.what]:
                out[what] = out.get(what, 0) + 1
        return out


def group(
    differences: Sequence[Difference],
    terminal: State | None = None,
    specs: Sequence[TableSpec] = (),
) -> list[TableDiff]:
    """Differences by table (first-seen order) and row key; with the terminal
    state and the domain's table specs, each field-differing row also carries
    its whole terminal row."""
    tables: dict[str, TableDiff] = {}
    rows: dict[tuple[str, str], RowDiff] = {}
    for d in differences:
        t = tables.setdefault(d.table, TableDiff(table=d.table))
        if d.kind == "row_order":
            t.order_expected = list(d.expected or [])
            t.order_got = list(d.actual or [])
            continue
        key = d.key or ""
        whole = WHOLE_ROW.get((d.kind, d.op))
        if whole is not None:
            row = d.expected if d.kind == "missing_effect" and d.op == "insert" else None
            if row is None:
                row = d.actual if d.actual is not None else d.expected
            t.rows.append(RowDiff(key=key, what=whole, row=row if isinstance(row, dict) else None))
            continue
        rd = rows.get((d.table, key))
        if rd is None:
            rd = RowDiff(key=key, what="field differences")
            rows[(d.table, key)] = rd
            t.rows.append(rd)
        rd.fields.append(
            FieldDiff(
                field=d.field or "",
                what=FIELD.get((d.kind, d.op), d.kind),
                expected=d.expected,
                got=d.actual,
            )
        )
    if terminal is not None and rows:
        _attach_rows(rows, terminal, {s.name: s for s in specs})
    return list(tables.values())


def _attach_rows(rows: dict[tuple[str, str], RowDiff], terminal: State, specs: dict[str, TableSpec]) -> None:
    # The key text is what `TableSpec.key_of` printed; index each table once.
    index: dict[str, dict[str, dict[str, Any]]] = {}
    for (table, key), rd in rows.items():
        spec = specs.get(table)
        if spec is None:
            continue
        if table not in index:
            by_key: dict[str, dict[str, Any]] = {}
            for row in terminal.get(table, []):
                try:
                    by_key[spec.key_of(row)] = row
                except KeyError:
                    continue
            index[table] = by_key
        rd.got_row = index[table].get(key)
