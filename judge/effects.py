"""Effects and labelled differences between canonical states.

Rows are matched by primary key (`TableSpec.key_of` on the canonical row:
composite keys through the table's key format, integer ids as their decimal
text), never by position. Canonical rows have the table's unstable fields
dropped already, so those never show up as effects.

    effects = compute_effects(tables, initial, terminal)
    diffs = golden_differences(tables, initial, terminal, golden)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from judge.canonical import State, same_value
from judge.records import Difference, DifferenceKind, EffectOp, Effects, RowEffect, TableEffects
from servers.engine.schema import TableSpec

Row = dict[str, Any]


class StateShapeError(ValueError):
    """A state does not fit the table metadata (unknown table, duplicate or missing key)."""


def index_rows(spec: TableSpec, rows: Iterable[Row]) -> dict[str, Row]:
    """Rows of one table by key, in the list's order."""
    out: dict[str, Row] = {}
    for row in rows:
        try:
            key = spec.key_of(row)
        except KeyError as exc:
            raise StateShapeError(f"{spec.name}: a row has no key field {exc.args[0]!r}") from None
        if key in out:
            raise StateShapeError(f"{spec.name}: two rows with key {key!r}")
        out[key] = row
    return out


def _specs(tables: Iterable[TableSpec], *states: State) -> list[TableSpec]:
    specs = list(tables)
    known = {s.name for s in specs}
    unknown = sorted({name for st in states for name in st} - known)
    if unknown:
        raise StateShapeError(f"state has tables the domain does not declare: {', '.join(unknown)}")
    return specs


def _changed_fields(a: Row, b: Row) -> list[str]:
    # same_value, not `!=`: a NaN read twice is two floats that never compare equal.
    return sorted(k for k in a.keys() | b.keys() if not same_value(a.get(k), b.get(k)))


def table_effects(spec: TableSpec, before: Sequence[Row], after: Sequence[Row]) -> TableEffects:
    out = TableEffects()
    if before == after:
        return out
    b = index_rows(spec, before)
    a = index_rows(spec, after)
    for key, row in a.items():
        old = b.get(key)
        if old is None:
            out.inserted.append(RowEffect(key=key, after=row))
        elif not same_value(old, row):
            fields = _changed_fields(old, row)
            out.updated.append(
                RowEffect(
                    key=key, before={f: old.get(f) for f in fields}, after={f: row.get(f) for f in fields}
                )
            )
    out.deleted = [RowEffect(key=key, before=row) for key, row in b.items() if key not in a]
    return out


def compute_effects(tables: Iterable[TableSpec], before: State, after: State) -> Effects:
    """What changed from `before` to `after`, per table (changed tables only)."""
    effects = Effects()
    for spec in _specs(tables, before, after):
        te = table_effects(spec, before.get(spec.name, []), after.get(spec.name, []))
        if not te.empty:
            effects.tables[spec.name] = te
    return effects


def table_differences(
    spec: TableSpec, initial: Sequence[Row], terminal: Sequence[Row], golden: Sequence[Row]
) -> list[Difference]:
    if terminal == golden:
        return []
    name = spec.name
    i_rows = index_rows(spec, initial)
    t_rows = index_rows(spec, terminal)
    g_rows = index_rows(spec, golden)
    out: list[Difference] = []
    for key in [*g_rows, *(k for k in t_rows if k not in g_rows)]:
        g, t, i = g_rows.get(key), t_rows.get(key), i_rows.get(key)
        if t is None:
            assert g is not None
            if i is not None:  # golden kept the row, the attempt deleted it
                out.append(Difference(kind="extra_effect", op="delete", table=name, key=key, expected=g))
            else:  # golden inserted it, the attempt did not
                out.append(Difference(kind="missing_effect", op="insert", table=name, key=key, expected=g))
            continue
        if g is None:
            if i is not None:  # golden deleted the row, the attempt kept it
                out.append(Difference(kind="missing_effect", op="delete", table=name, key=key, actual=t))
            else:  # the attempt inserted a row golden does not have
                out.append(Difference(kind="extra_effect", op="insert", table=name, key=key, actual=t))
            continue
        if same_value(g, t):
            continue
        for f in _changed_fields(g, t):
            gv, tv = g.get(f), t.get(f)
            kind: DifferenceKind = "wrong_value"
            op: EffectOp | None = None
            if i is not None:
                iv = i.get(f)
                if same_value(gv, iv):  # golden left the field alone, the attempt changed it
                    kind, op = "extra_effect", "update"
                elif same_value(tv, iv):  # golden changed the field, the attempt left it alone
                    kind, op = "missing_effect", "update"
            out.append(Difference(kind=kind, op=op, table=name, key=key, field=f, expected=gv, actual=tv))
    # Tables without an `id` field keep insertion order, and the hash sees it.
    g_order = [k for k in g_rows if k in t_rows]
    t_order = [k for k in t_rows if k in g_rows]
    if g_order != t_order:
        out.append(Difference(kind="row_order", table=name, expected=g_order, actual=t_order))
    return out


def golden_differences(
    tables: Iterable[TableSpec], initial: State, terminal: State, golden: State
) -> list[Difference]:
    """Labelled differences of an attempt's terminal state from the golden end
    state; `initial` is the state both started from. Equivalent to comparing
    the attempt's effects with golden's effects (both relative to `initial`):

    * a row golden inserted (deleted) that the attempt did not insert (delete),
      and a field golden changed that the attempt left at its initial value,
      are `missing_effect`s;
    * a row the attempt inserted (deleted) that golden did not, and a field the
      attempt changed that golden left at its initial value, are `extra_effect`s;
    * a field both changed (or of a row both inserted) to different values is a
      `wrong_value`;
    * rows both hold, in a different relative order, are one `row_order` for
      the table (only tables without an `id` field can differ so).

    Empty exactly when every table holds the same rows in the same order."""
    out: list[Difference] = []
    for spec in _specs(tables, initial, terminal, golden):
        out.extend(
            table_differences(
                spec, initial.get(spec.name, []), terminal.get(spec.name, []), golden.get(spec.name, [])
            )
        )
    return out
