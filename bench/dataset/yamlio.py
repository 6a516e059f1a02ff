"""Fast, safe YAML / JSON reading (libyaml's CSafeLoader when available)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` semantics, libyaml speed."""
    return yaml.load(text, Loader=_Loader)


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def read_json(path: Path) -> Any:
    with path.open("rb") as fh:
        return json.load(fh)


def yaml_error_message(exc: yaml.YAMLError, line_offset: int = 0) -> str:
    """``invalid YAML at line L, column C: <problem>`` (lines 1-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and mark is not None and context_mark.line != mark.line:
        context = f"{context} started at line {context_mark.line + 1 + line_offset}"
    detail = f"{context}; {problem}" if context else str(problem)
    if mark is not None:
        return f"invalid YAML at line {mark.line + 1 + line_offset}, column {mark.column + 1}: {detail}"
    return f"invalid YAML: {detail}"
