"""Every implemented domain advertises exactly the reference's tools, in the
reference's listing order, with identical parameter names, types,
required-ness, defaults and enums (descriptions, titles and examples are ours)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servers.registry import domain_names, load_domain

COSMETIC = {"description", "title", "examples"}


def structural(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: structural(v) for k, v in node.items() if k not in COSMETIC}
    if isinstance(node, list):
        return [structural(v) for v in node]
    return node


@pytest.mark.parametrize("name", domain_names())
def test_tools_match_reference(name: str, dataset: Path) -> None:
    domain = load_domain(name)
    ref = json.loads((dataset / "servers" / domain.module / "tools.json").read_text())["agent_tools"]
    assert [t.name for t in domain.tools] == [t["name"] for t in ref]
    for ours, theirs in zip(domain.tools, ref, strict=True):
        assert structural(ours.input_schema) == structural(theirs["input_schema"]), ours.name
        assert ours.description and ours.description != theirs["description"], (
            f"{ours.name}: write the description in our own words"
        )
