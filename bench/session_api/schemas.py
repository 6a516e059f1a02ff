"""A tool's `inputSchema` as the Session API lists it (the reference's normalisation):
local `$ref`s replaced by deep copies of their targets (keys beside a `$ref` dropped),
the top-level `$defs` removed, and `title` removed from the top level and from each
direct member of `properties` (deeper titles stay)."""

from __future__ import annotations

import copy
from typing import Any


class SchemaError(ValueError):
    pass


def _pointer(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        raise SchemaError(f"Missing definition for reference: {ref}")
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaError(f"Missing definition for reference: {ref}")
    return node


def _resolve(node: Any, root: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                raise SchemaError(f"Circular reference detected: {ref}")
            return _resolve(copy.deepcopy(_pointer(root, ref)), root, (*seen, ref))
        return {k: _resolve(v, root, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, root, seen) for v in node]
    return node


def normalise_schema(schema: dict[str, Any]) -> dict[str, Any]:
    out = _resolve(schema, schema, ())
    if not isinstance(out, dict):
        raise SchemaError("a tool's inputSchema must be an object")
    out.pop("$defs", None)
    out.pop("title", None)
    props = out.get("properties")
    if isinstance(props, dict):
        for prop in props.values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    return out
