"""Lookup toolset: a deterministic mock VIN decoder (no tables)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.engine.helpers import LaxInput, drop_nulls
from servers.engine.tools import ToolContext, ToolError, tool

# Model-year code (10th VIN character). 2025's code is deliberately not decoded.
_YEARS = {
    "A": 2010, "B": 2011, "C": 2012, "D": 2013, "E": 2014, "F": 2015, "G": 2016, "H": 2017,
    "J": 2018, "K": 2019, "L": 2020, "M": 2021, "N": 2022, "P": 2023, "R": 2024,
}  # fmt: skip

# World manufacturer identifier (first three characters) -> (make, model).
_MAKERS: dict[str, tuple[str, str | None]] = {
    "1HG": ("Honda", "Accord"),
    "2HG": ("Honda Canada", None),
    "1FA": ("Ford", "Focus"),
    "1FT": ("Ford Truck", "F-150"),
    "5YJ": ("Tesla", "Model S"),
}


class ValidateVinInput(LaxInput):
    vin: str = Field(description="The VIN to check (17 letters and digits).")


@tool(
    "lookup_validate_vin",
    ValidateVinInput,
    "Check that a VIN is well formed and decode what it can: model year and, for a few known "
    "manufacturers, make and model.",
)
def validate_vin(ctx: ToolContext, args: ValidateVinInput) -> dict[str, Any]:
    vin = args.vin.strip().upper()
    if len(vin) != 17:
        raise ToolError("Invalid VIN format. VIN must be exactly 17 characters.")
    if not vin.isalnum():
        raise ToolError("Invalid VIN format. VIN must contain only letters and numbers.")
    make, model = _MAKERS.get(vin[:3], (None, None))
    return drop_nulls({"valid": True, "year": _YEARS.get(vin[9]), "make": make, "model": model})


TOOLS = (validate_vin,)
