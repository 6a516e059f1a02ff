"""Build an attempt's initial state (base seed rows + the task's data_patch) and
bulk-load it into a fresh PostgreSQL database.

This runs on the host side (the sandbox seeds a database before any tool
server sees it), so no reserved/admin tool needs to exist in the servers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import psycopg
from psycopg import sql
from pydantic import ValidationError

from servers.engine.rows import format_validation_error, validate_row
from servers.engine.schema import TableSpec
from servers.engine.store import TOOL_ROLE, db_params, ddl


class DataPatchError(ValueError):
    """The task's data_patch cannot be applied (the whole init fails)."""


def initial_rows(
    tables: Iterable[TableSpec],
    seed: Mapping[str, list[dict[str, Any]]],
    data_patch: Mapping[str, Any] | None,
    now: dt.datetime | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Seed rows in file order, then the patch as an upsert by key: an existing
    row is replaced whole and keeps its position, a new key is appended."""
    specs = {t.name: t for t in tables}
    state: dict[str, dict[str, dict[str, Any]]] = {}
    for name, spec in specs.items():
        rows: dict[str, dict[str, Any]] = {}
        for i, raw in enumerate(seed.get(name, [])):
            try:
                row = validate_row(spec, raw, now)
            except ValidationError as exc:
                raise DataPatchError(
                    f"seed row {i} of table '{name}' is invalid: {format_validation_error(exc)}"
                ) from exc
            rows[spec.key_of(row)] = row
        state[name] = rows
    unknown_seed = sorted(set(seed) - set(specs))
    if unknown_seed:
        raise DataPatchError(f"seed names unknown tables: {', '.join(unknown_seed)}")
    for name, patch_rows in validated_patch(specs.values(), data_patch, now).items():
        for patched in patch_rows:
            state[name][specs[name].key_of(patched)] = patched  # dict keeps the first position of a key
    return {name: list(rows.values()) for name, rows in state.items()}


def validated_patch(
    tables: Iterable[TableSpec], data_patch: Mapping[str, Any] | None, now: dt.datetime | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The patch's rows validated by their tables (file order), or DataPatchError naming
    every table that fails (a dataset check calls this alone: the seed is checked once)."""
    specs = {t.name: t for t in tables}
    out: dict[str, list[dict[str, Any]]] = {}
    errors: list[str] = []
    for name, patch_rows in (data_patch or {}).items():
        if name not in specs:
            errors.append(f"Unknown table '{name}'")
            continue
        if not isinstance(patch_rows, list):
            errors.append(f"Table '{name}' must contain a list of items")
            continue
        rows = out.setdefault(name, [])
        for raw in patch_rows:
            try:
                rows.append(validate_row(specs[name], raw, now))
            except ValidationError as exc:
                # The reference stops this table at its first bad row; other tables go on.
                errors.append(f"Validation error for table '{name}': {format_validation_error(exc)}")
                break
    if errors:
        raise DataPatchError(f"Data patch validation failed: {'; '.join(errors)}")
    return out


def create_schema(
    conn: psycopg.Connection[Any], tables: Iterable[TableSpec], tool_role: str = TOOL_ROLE
) -> None:
    """Create the domain's tables and let the tool role read and write rows only."""
    for spec in tables:
        conn.execute(ddl(spec))
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
                sql.Identifier(spec.name), sql.Identifier(tool_role)
            )
        )


def copy_rows(conn: psycopg.Connection[Any], spec: TableSpec, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = sql.SQL(", ").join([sql.Identifier("_key"), *(sql.Identifier(n) for n in spec.field_names)])
    with (
        conn.cursor() as cur,
        cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(spec.name), cols)) as cp,
    ):
        for row in rows:
            cp.write_row(db_params(spec, row))


def load_state(
    conn: psycopg.Connection[Any],
    tables: Iterable[TableSpec],
    rows_by_table: Mapping[str, list[dict[str, Any]]],
    tool_role: str = TOOL_ROLE,
) -> None:
    """Create the schema and bulk-load every table in one transaction."""
    specs = list(tables)
    with conn.transaction():
        create_schema(conn, specs, tool_role)
        for spec in specs:
            copy_rows(conn, spec, rows_by_table.get(spec.name, []))
