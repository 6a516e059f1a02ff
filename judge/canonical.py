"""The reference's canonical ("stable") state and its SHA-256.

Rows are rendered in state form, unstable fields dropped, primitive lists
sorted, rows ordered by the text of their `id` (code-point order; id-less
tables keep storage order), then serialised with sorted keys, no whitespace
and ASCII-only escapes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from servers.engine.rows import to_state_row
from servers.engine.schema import TableSpec
from servers.engine.store import Store
from servers.registry import load_domain

State = dict[str, list[dict[str, Any]]]


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return sorted(value)
        if value and all(isinstance(v, (int, float)) for v in value):  # bools are ints here, as in Python
            return sorted(value)
        return [_normalise(v) for v in value]
    return value


def stable_rows(spec: TableSpec, raw_rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """State-form rows of one table in canonical order, unstable fields removed."""
    drop = set(spec.unstable_fields)
    rows = [
        {k: _normalise(v) for k, v in to_state_row(spec, dict(r)).items() if k not in drop} for r in raw_rows
    ]
    if spec.has_id:
        rows.sort(key=lambda r: str(r["id"]))  # stable; str compares by code point
    return rows


def canonical_state(
    tables: Iterable[TableSpec], rows_by_table: Mapping[str, Iterable[Mapping[str, Any]]]
) -> State:
    return {spec.name: stable_rows(spec, rows_by_table.get(spec.name, [])) for spec in tables}


def canonical_bytes(state: State) -> bytes:
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def state_hash(state: State) -> str:
    return hashlib.sha256(canonical_bytes(state)).hexdigest()


@functools.cache
def canonical_source_hash() -> str:
    """sha256 of this file: a state canonicalised by other code is another state
    (bench's golden cache keys on it)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def same_value(a: Any, b: Any) -> bool:
    """Equal as the hash sees them: Python's `==`, or the same canonical JSON text (a NaN
    equals a NaN there, where `==` says it never equals anything)."""
    if a == b:
        return True
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError):
        return False


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float as the text JSON5 and JavaScript give it
    ("NaN", "Infinity", "-Infinity"): strict JSON has no such number, and a state
    answered to a client must serialise whatever a row holds. Hashes are taken of
    the state itself, never of this form."""
    if isinstance(value, float):
        return _NON_FINITE.get(repr(value), value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def raw_state(conn: psycopg.Connection[Any], tables: Iterable[TableSpec]) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows in storage order, as Python values (one snapshot)."""
    specs = list(tables)
    store = Store(conn, specs)
    with conn.transaction():
        conn.execute(sql.SQL("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        return {spec.name: store.all(spec.name) for spec in specs}


def dump_canonical(conn: psycopg.Connection[Any], tables: Iterable[TableSpec]) -> State:
    specs = list(tables)
    return canonical_state(specs, raw_state(conn, specs))


def dump_dsn(dsn: str, domain_name: str) -> State:
    """The canonical state of one domain's tables behind a connection string
    (a sandbox's host-side superuser DSN: the attempt's and the golden replay's dumps)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dump_canonical(conn, load_domain(domain_name).tables)
