"""Table metadata: the single source for DDL, seeding, row validation and the
canonical dump. Each domain declares its tables with `table()` / `f()`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

FieldKind = Literal["str", "int", "float", "bool", "decimal", "date", "datetime", "list_str", "enum"]

_NO_DEFAULT: Any = ...


class FieldSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    kind: FieldKind
    nullable: bool = False
    # `...` (Ellipsis) marks a required field; lists default through `default_list`.
    default: Any = _NO_DEFAULT
    default_list: bool = False
    # The travel corporate-account model fills a missing timestamp with the
    # current naive UTC time; the engine substitutes its configured "now".
    default_now: bool = False
    enum_name: str | None = None
    enum_values: tuple[str, ...] = ()
    min_length: int | None = None
    unstable: bool = False
    # A non-null value that is not a string is stored as its `str()` (the
    # consulting Zendesk user's `organization_id`: 7 -> "7", true -> "True").
    to_text: bool = False

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT and not self.default_list and not self.default_now


class TableSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # the state key, e.g. "zendesk_tickets"
    key_fields: tuple[str, ...]
    key_format: str | None = None  # composite keys, e.g. "{employee_email}:{client_id}"
    extra: Literal["forbid", "ignore"] = "ignore"
    fields: tuple[FieldSpec, ...]

    @property
    def has_id(self) -> bool:
        return any(fs.name == "id" for fs in self.fields)

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(fs.name for fs in self.fields)

    @property
    def unstable_fields(self) -> tuple[str, ...]:
        return tuple(fs.name for fs in self.fields if fs.unstable)

    def field(self, name: str) -> FieldSpec:
        for fs in self.fields:
            if fs.name == name:
                return fs
        raise KeyError(f"{self.name} has no field {name!r}")

    def key_of(self, row: Mapping[str, Any]) -> str:
        """The row's identity as text: integer ids compare as their decimal text."""
        if self.key_format is not None:
            return self.key_format.format(**{k: row[k] for k in self.key_fields})
        return str(row[self.key_fields[0]])


def f(
    name: str,
    kind: FieldKind,
    *,
    nullable: bool = False,
    default: Any = _NO_DEFAULT,
    default_list: bool = False,
    default_now: bool = False,
    enum: tuple[str, tuple[str, ...]] | None = None,
    min_length: int | None = None,
    unstable: bool = False,
) -> FieldSpec:
    return FieldSpec(
        name=name,
        kind=kind,
        nullable=nullable,
        default=default,
        default_list=default_list,
        default_now=default_now,
        enum_name=enum[0] if enum else None,
        enum_values=enum[1] if enum else (),
        min_length=min_length,
        unstable=unstable,
    )


def table(
    name: str,
    key: tuple[str, ...] | str,
    fields: list[FieldSpec],
    *,
    extra: Literal["forbid", "ignore"] = "ignore",
    key_format: str | None = None,
) -> TableSpec:
    key_fields = (key,) if isinstance(key, str) else key
    return TableSpec(
        name=name, key_fields=key_fields, key_format=key_format, extra=extra, fields=tuple(fields)
    )
