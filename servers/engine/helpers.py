"""Small rules several domains share: the lax input base, output rendering
(null omission, datetimes) and count-based ids."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict

from servers.engine.store import Store
from servers.engine.tools import ToolInput


class LaxInput(ToolInput):
    """Input base of tools that silently ignore unknown parameters."""

    model_config = ConfigDict(extra="ignore")


def drop_nulls(data: Mapping[str, Any]) -> dict[str, Any]:
    """Drop top-level keys whose value is null (output models omit them)."""
    return {k: v for k, v in data.items() if v is not None}


def out_dt(value: dt.datetime | None) -> str | None:
    """Output form of a datetime: `isoformat()` (`+00:00` for UTC, the original
    offset otherwise, nothing for naive values); None stays None."""
    return None if value is None else value.isoformat()


def count_id(db: Store, table: str, fmt: str, offset: int = 1) -> str:
    """`fmt % (row count + offset)`: no collision check (an existing id makes
    the insert fail)."""
    return fmt % (db.count(table) + offset)
