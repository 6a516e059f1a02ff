"""How rubric questions are put to the judge model: the two styles `judge.rubric`
asks in, the default, and what an unrecorded run used. Standard library only, so a
models config or a manifest can name a style without loading the judge."""

from __future__ import annotations

from typing import Literal, get_args

RubricStyle = Literal["reference", "json"]
RUBRIC_STYLES: tuple[RubricStyle, ...] = get_args(RubricStyle)
# The benchmark's own way (the reference Judge's text_yesno): scores compare with published ones.
DEFAULT_RUBRIC_STYLE: RubricStyle = "reference"
# What a run whose manifest names no style was graded with (tbx before the reference style).
UNRECORDED_RUBRIC_STYLE: RubricStyle = "json"


def recorded_rubric_style(value: object) -> RubricStyle:
    """The style a run's manifest records (`rubric_judge`): the unrecorded one for a
    manifest written before the key existed (or a value tbx does not know)."""
    return next((style for style in RUBRIC_STYLES if style == value), UNRECORDED_RUBRIC_STYLE)
