"""Row validation and rendering, derived from a table's `TableSpec`.

Rows travel as plain dicts of Python values: enum fields hold their value
string, datetimes are `datetime` objects, money is `Decimal` where the model
says Decimal. Validation uses pydantic in lax mode so coercions and error
texts match the reference's models.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from servers.engine.schema import FieldSpec, TableSpec

_PY_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "decimal": Decimal,
    "date": dt.date,
    "datetime": dt.datetime,
    "list_str": list[str],
}


# Every number is finite, as the schemas' "number" promises (pydantic's default lets NaN
# and the infinities through): a non-finite value would be stored, and no later state
# dump of the attempt would be JSON. Tool inputs and table rows (seeds, data patches,
# tool writes) both refuse them, each with the ordinary validation error.
FINITE_NUMBERS = ConfigDict(allow_inf_nan=False)


@functools.cache
def _enum_type(name: str, values: tuple[str, ...]) -> type[enum.Enum]:
    return enum.Enum(name, {v: v for v in values}, type=str)  # type: ignore[return-value]


def _as_text(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else str(value)


def _annotation(fs: FieldSpec) -> Any:
    base: Any = (
        _enum_type(fs.enum_name or fs.name, fs.enum_values) if fs.kind == "enum" else _PY_TYPES[fs.kind]
    )
    annotation = base | None if fs.nullable else base
    return Annotated[annotation, BeforeValidator(_as_text)] if fs.to_text else annotation


def _field_info(fs: FieldSpec, now: dt.datetime | None) -> Any:
    kwargs: dict[str, Any] = {}
    if fs.min_length is not None:
        kwargs["min_length"] = fs.min_length
    if fs.default_list:
        return Field(default_factory=list, **kwargs)
    if fs.default_now:
        return Field(default_factory=lambda: now, **kwargs)
    if fs.required:
        return Field(..., **kwargs)
    return Field(default=fs.default, **kwargs)


@functools.cache
def row_model(spec: TableSpec, now: dt.datetime | None = None) -> type[BaseModel]:
    """The pydantic model validating one row of `spec` (`now` feeds wall-clock defaults)."""
    config = FINITE_NUMBERS | ConfigDict(extra=spec.extra, use_enum_values=True, validate_default=False)
    fields = {fs.name: (_annotation(fs), _field_info(fs, now)) for fs in spec.fields}
    return create_model(_model_name(spec.name), __config__=config, **fields)  # type: ignore[call-overload]


def _model_name(state_key: str) -> str:
    return "".join(part.title() for part in state_key.split("_"))


def validate_row(spec: TableSpec, data: Any, now: dt.datetime | None = None) -> dict[str, Any]:
    """Validate a complete row (defaults filled, extras dropped or rejected)."""
    return row_model(spec, now).model_validate(data).model_dump()


def format_validation_error(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())


def render_datetime(value: dt.datetime) -> str:
    """State form: `Z` for UTC, `+HH:MM` for other offsets, nothing for naive;
    microseconds only when non-zero (always six digits)."""
    text = value.replace(tzinfo=None).isoformat()
    off = value.utcoffset()
    if off is None:
        return text
    if off == dt.timedelta(0):
        return text + "Z"
    return text + value.strftime("%z")[:3] + ":" + value.strftime("%z")[3:]


def to_state_value(fs: FieldSpec, value: Any) -> Any:
    """One field in the JSON form the reference dumps (and hashes)."""
    if value is None:
        return None
    if fs.kind == "datetime":
        return render_datetime(value)
    if fs.kind == "date":
        return value.isoformat()
    if fs.kind == "decimal":
        return str(value)
    if fs.kind == "float":
        return float(value)
    if fs.kind == "list_str":
        return list(value)
    return value


def to_state_row(spec: TableSpec, row: dict[str, Any]) -> dict[str, Any]:
    return {fs.name: to_state_value(fs, row.get(fs.name)) for fs in spec.fields}
