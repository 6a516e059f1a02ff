"""PostgreSQL-backed table store with the reference engine's semantics.

Every table carries two hidden columns: `_seq` (insertion order, never
renumbered by an update or an upsert, because "first match" look-ups and the
canonical order of id-less tables depend on it) and `_key` (the row identity as
text, so composite and integer ids compare exactly as the reference does).
Datetimes are stored as their state-form text: a `timestamptz` column would
lose the original offset and could not hold naive and aware values together.
Decimals are stored as text too: `numeric` normalises `-0.00` to `0.00` and
`1E+3` to `1000`, and the reference hashes the digits exactly as written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from servers.engine.errors import ToolError
from servers.engine.rows import render_datetime, validate_row
from servers.engine.schema import FieldSpec, TableSpec

_SQL_TYPES = {
    "str": "text",
    "enum": "text",
    "int": "bigint",
    "float": "double precision",
    "bool": "boolean",
    "decimal": "text",
    "date": "date",
    "datetime": "text",
    "list_str": "text[]",
}

TOOL_ROLE = "tbx_tool"


class StoreError(Exception):
    """A store operation failed with the reference engine's message."""


def ddl(spec: TableSpec) -> sql.Composed:
    cols: list[sql.Composable] = [
        sql.SQL("_seq bigint GENERATED ALWAYS AS IDENTITY"),
        sql.SQL("_key text PRIMARY KEY"),
    ]
    for fs in spec.fields:
        null = sql.SQL("") if fs.nullable else sql.SQL(" NOT NULL")
        cols.append(sql.SQL("{} {}{}").format(sql.Identifier(fs.name), sql.SQL(_SQL_TYPES[fs.kind]), null))
    return sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(spec.name), sql.SQL(", ").join(cols))


def _to_db(fs: FieldSpec, value: Any) -> Any:
    if value is None:
        return None
    if fs.kind == "decimal":
        return str(value)
    if fs.kind == "datetime":
        return render_datetime(value)
    if fs.kind == "list_str":
        return list(value)
    return value


def _from_db(fs: FieldSpec, value: Any) -> Any:
    if value is None:
        return None
    if fs.kind == "decimal":
        return Decimal(value)
    if fs.kind == "datetime":
        return dt.datetime.fromisoformat(value)
    return value


def db_params(spec: TableSpec, row: Mapping[str, Any]) -> list[Any]:
    """`_key` followed by every field, in declaration order, as stored."""
    return [spec.key_of(row), *(_to_db(fs, row.get(fs.name)) for fs in spec.fields)]


class Store:
    """Row access for one domain, on one connection. Tool calls wrap their
    work in a transaction (see `servers.engine.tools`)."""

    def __init__(
        self, conn: psycopg.Connection[Any], tables: Iterable[TableSpec], now: dt.datetime | None = None
    ):
        self.conn = conn
        self.tables = {t.name: t for t in tables}
        self.now = now

    def spec(self, table: str) -> TableSpec:
        try:
            return self.tables[table]
        except KeyError:
            raise StoreError(f"Unknown table '{table}'") from None

    # ---- reads -------------------------------------------------------------
    def _select(self, spec: TableSpec, where: sql.Composable, params: Sequence[Any]) -> list[dict[str, Any]]:
        cols = sql.SQL(", ").join(sql.Identifier(n) for n in spec.field_names)
        query = sql.SQL("SELECT {} FROM {} {} ORDER BY _seq").format(cols, sql.Identifier(spec.name), where)
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return [
                {fs.name: _from_db(fs, v) for fs, v in zip(spec.fields, rec, strict=True)}
                for rec in cur.fetchall()
            ]

    def all(self, table: str) -> list[dict[str, Any]]:
        """Every row in storage order."""
        return self._select(self.spec(table), sql.SQL(""), ())

    def find(self, table: str, **equals: Any) -> list[dict[str, Any]]:
        """Rows whose fields equal the given values, in storage order."""
        spec = self.spec(table)
        if not equals:
            return self.all(table)
        conds = sql.SQL(" AND ").join(
            sql.SQL("{} = %s").format(sql.Identifier(spec.field(name).name)) for name in equals
        )
        params = [_to_db(spec.field(n), v) for n, v in equals.items()]
        return self._select(spec, sql.SQL("WHERE ") + conds, params)

    def first(self, table: str, **equals: Any) -> dict[str, Any] | None:
        rows = self.find(table, **equals)
        return rows[0] if rows else None

    def get(self, table: str, key: str) -> dict[str, Any] | None:
        rows = self._select(self.spec(table), sql.SQL("WHERE _key = %s"), (key,))
        return rows[0] if rows else None

    def require(self, table: str, key: str, missing: str, /) -> dict[str, Any]:
        """The row with this key; without one the tool fails with `missing`
        as its error text (a `ToolError`: no catch-all prefix)."""
        row = self.get(table, key)
        if row is None:
            raise ToolError(missing)
        return row

    def require_first(self, table: str, missing: str, /, **equals: Any) -> dict[str, Any]:
        """The first row matching `equals`; without one the tool fails with `missing`."""
        row = self.first(table, **equals)
        if row is None:
            raise ToolError(missing)
        return row

    def exists(self, table: str, key: str) -> bool:
        query = sql.SQL("SELECT 1 FROM {} WHERE _key = %s").format(sql.Identifier(self.spec(table).name))
        return self.conn.execute(query, (key,)).fetchone() is not None

    def count(self, table: str) -> int:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(self.spec(table).name))
        row = self.conn.execute(query).fetchone()
        return int(row[0]) if row else 0

    def keys(self, table: str) -> set[str]:
        query = sql.SQL("SELECT _key FROM {}").format(sql.Identifier(self.spec(table).name))
        return {r[0] for r in self.conn.execute(query).fetchall()}

    def first_free_id(self, table: str, fmt: str, start: int) -> str:
        """`fmt % n` for the smallest n >= start not already used as a key."""
        used = self.keys(table)
        n = start
        while fmt % n in used:
            n += 1
        return fmt % n

    # ---- writes ------------------------------------------------------------
    def validate(self, table: str, data: Mapping[str, Any]) -> dict[str, Any]:
        return validate_row(self.spec(table), dict(data), self.now)

    def insert(self, table: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and append a row; a duplicate key fails like the reference."""
        spec = self.spec(table)
        row = self.validate(table, data)
        key = spec.key_of(row)
        if self.exists(table, key):
            raise StoreError(f"Object with ID {key} already exists")
        cols = sql.SQL(", ").join([sql.Identifier("_key"), *(sql.Identifier(n) for n in spec.field_names)])
        marks = sql.SQL(", ").join(sql.Placeholder() * (len(spec.fields) + 1))
        self.conn.execute(
            sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(sql.Identifier(spec.name), cols, marks),
            db_params(spec, row),
        )
        return row

    def replace(self, table: str, key: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """Replace a whole row in place (its storage position is kept)."""
        spec = self.spec(table)
        row = self.validate(table, data)
        assigns = sql.SQL(", ").join(
            sql.SQL("{} = %s").format(sql.Identifier(n)) for n in ("_key", *spec.field_names)
        )
        cur = self.conn.execute(
            sql.SQL("UPDATE {} SET {} WHERE _key = %s").format(sql.Identifier(spec.name), assigns),
            [*db_params(spec, row), key],
        )
        if cur.rowcount == 0:
            raise StoreError(f"Object with ID {key} does not exist")
        return row

    def update(self, table: str, key: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `changes` into the stored row and re-validate it as a whole."""
        current = self.get(table, key)
        if current is None:
            raise StoreError(f"Object with ID {key} does not exist")
        return self.replace(table, key, {**current, **changes})

    def upsert(self, table: str, data: Mapping[str, Any]) -> dict[str, Any]:
        spec = self.spec(table)
        row = self.validate(table, data)
        key = spec.key_of(row)
        if self.exists(table, key):
            return self.replace(table, key, row)
        return self.insert(table, row)

    def delete(self, table: str, key: str) -> None:
        spec = self.spec(table)
        cur = self.conn.execute(
            sql.SQL("DELETE FROM {} WHERE _key = %s").format(sql.Identifier(spec.name)), (key,)
        )
        if cur.rowcount == 0:
            raise StoreError(f"Object with ID {key} does not exist")
