"""The tools a reset shows are built once per task and registration listing and shared by
the task's episodes: the same value a fresh conversion gives (scenario overrides applied),
a new one for a listing that differs (another image of the servers)."""

from __future__ import annotations

import copy
from pathlib import Path

from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.env.host import EnvHost, EnvOptions
from bench.llm.config import ModelsConfig
from bench.rollout.tools import apply_overrides, mcp_tool_to_openai

PACK = DEMO_PACK


def listing_of(names: list[str]) -> list[dict[str, object]]:
    return [
        {
            "name": n,
            "description": f"{n} does one thing",
            "inputSchema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        }
        for n in names
    ]


def test_built_once_per_task_and_listing(tmp_path: Path) -> None:
    bench = load_benchmark(PACK)
    task = next(t for t in bench.tasks if bench.scenario_of(t).tools)
    host = EnvHost(bench, ModelsConfig(), [task], EnvOptions(out=tmp_path / "out"))
    names = [t.name for t in bench.scenario_of(task).tools] + ["unlisted_tool"]
    listing = listing_of(names)
    expected = apply_overrides([mcp_tool_to_openai(x) for x in listing], bench.scenario_of(task).tools)

    first = host.offered_tools(task, listing)
    assert first == expected
    assert host.offered_tools(task, copy.deepcopy(listing)) is first  # an equal listing: shared

    other = listing_of(names[:1])
    rebuilt = host.offered_tools(task, other)
    assert rebuilt is not first and [t["function"]["name"] for t in rebuilt] == names[:1]
