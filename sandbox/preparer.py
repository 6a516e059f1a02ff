"""What a sandbox is filled with at checkout, handed in by the caller.

The sandbox knows containers, not domains: it creates one empty schema per
domain (usable by the tool role) and, when Typesense runs, knows where the
search engine listens. What goes into them (tables, rows, documents) and
whether a request can be prepared at all is the caller's business (bench's
`bench.prepare.TaskPreparation`), through this interface.

The preparer also takes the attempt's initial state (`snapshot`) right after it
seeded, so a sandbox prepared ahead in a warm pool carries it to its checkout:
nothing reaches a spare before its hand-over (the servers answer only the
proxy's secret, the database only the host's rotated password), and
`PreparedState.marker` proves it at the hand-over (see `Sandbox.prepared_states`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import psycopg
from pydantic import BaseModel


class TypesenseEndpoint(BaseModel):
    url: str
    api_key: str
    collection: str  # the name the attempt's servers search (fixed at boot)


@runtime_checkable
class Preparer(Protocol):
    def check(self, domains: Sequence[str]) -> None:
        """Raise `sandbox.errors.SeedError` if this cannot prepare a sandbox of `domains`.
        Called before anything starts, so bad input leaves nothing behind."""

    def seed(self, conn: psycopg.Connection[Any], domain: str, tool_role: str) -> None:
        """Fill `domain`'s schema: `conn` is the superuser connection (autocommit)
        with its search_path at that fresh, empty schema; grant `tool_role` what
        the domain's server needs. Raise SeedError on bad rows."""

    def index(self, typesense: TypesenseEndpoint) -> bool:
        """Index the attempt's documents into `typesense.collection`; False when
        there are none (the collection is then never created)."""

    def fingerprint(self) -> str:
        """Equal for two preparers that put exactly the same rows, documents and
        settings in place (a pool hands a sandbox prepared ahead only to an equal one)."""

    def snapshot(self, conn: psycopg.Connection[Any], domain: str) -> Any:
        """`domain`'s state as the attempt's record starts from it, read right after
        seeding (`conn` as in `seed`, autocommit, search_path at the schema); None:
        nothing to keep (the attempt dumps it itself at checkout)."""


class PreparedState(BaseModel):
    """What a preparer's `snapshot`s returned for one sandbox, and the database's
    write marker when they were taken (`Sandbox.prepared_states` hands them over
    only while the marker is unchanged: no transaction has written since)."""

    fingerprint: str  # the preparer's that seeded and read them
    marker: str
    states: dict[str, Any]  # domain -> the snapshot


def fingerprint(prepare: Preparer) -> str:
    return prepare.fingerprint()
