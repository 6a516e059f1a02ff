"""What a sandbox is filled with at checkout, handed in by the caller.

The sandbox knows containers, not domains: it creates one empty schema per
domain (usable by the tool role) and, when Typesense runs, knows where the
search engine listens. What goes into them (tables, rows, documents) and
whether a request can be prepared at all is the caller's business (bench's
`bench.prepare.TaskPreparation`), through this interface.
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


def fingerprint(prepare: Preparer) -> str:
    return prepare.fingerprint()
