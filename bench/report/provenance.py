"""A run's data provenance as its manifest recorded it (``dataset_provenance``, written by
bench.dataset.provenance): the one-line git state, and the note of a v1.0 run on data not
at the pinned tag. A manifest written before tbx recorded provenance has neither, and
nothing is said of it. Read leniently, as the rest of a manifest is: a report never fails
on a run's record of where its data came from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


class DataProvenance(BaseModel):
    git: str | None = None  # "git <commit> (tag ...)", "not a git checkout", ...
    note: str | None = None  # set when a pinned release ran on data not at its pin


def recorded_provenance(manifest: Mapping[str, Any]) -> DataProvenance | None:
    record = manifest.get("dataset_provenance")
    if not isinstance(record, Mapping):
        return None

    def text(key: str) -> str | None:
        value = record.get(key)
        return value if isinstance(value, str) and value else None

    return DataProvenance(git=text("git"), note=text("note"))
