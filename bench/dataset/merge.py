"""Scenario world_state + test init merge (canonicalization.md section 7, harness semantics).

Dicts merge recursively, lists concatenate (scenario first), anything else is
taken from the test (including a test's ``null`` over a scenario value). A
server whose scenario config is empty/null takes the test's config as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import DatasetError
from .models import Scenario, ServerInit, Task
from .parse import parse_server_init


def clone(value: Any) -> Any:
    """Deep copy of JSON/YAML-like data (dicts and lists copied, scalars shared)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def recursive_merge(a: Any, b: Any) -> Any:
    """Merge ``b`` over ``a`` without mutating either."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = {k: clone(v) for k, v in a.items()}
        for k, vb in b.items():
            out[k] = recursive_merge(out[k], vb) if k in out else clone(vb)
        return out
    if isinstance(a, list) and isinstance(b, list):
        return clone(a) + clone(b)
    return clone(b)


def merge_init_config(world_state: Mapping[str, Any], init: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per-server merge of a scenario's world_state with a test's init (raw dicts)."""
    out: dict[str, Any] = {k: clone(v) for k, v in world_state.items()}
    for server, cfg in (init or {}).items():
        base = out.get(server)
        out[server] = recursive_merge(base, cfg) if base else clone(cfg)
    return out


def effective_inits(task: Task, scenario: Scenario) -> dict[str, ServerInit]:
    """The effective init config of every server of the task (scenario servers first).

    Raises ``DatasetError`` naming the task and field if the merged config is invalid
    (cannot happen for tasks that ``load_benchmark`` accepted).
    """
    if task.scenario != scenario.name:
        raise ValueError(f"task {task.id} uses scenario {task.scenario!r}, not {scenario.name!r}")
    raw_init = {server: cfg.raw for server, cfg in task.init.items()}
    merged = merge_init_config(scenario.world_state, raw_init)
    out: dict[str, ServerInit] = {}
    problems = []
    for server, cfg in merged.items():
        parsed, probs = parse_server_init(
            cfg, path=task.source, task=task.uid, field=f"init.{server} (merged with {scenario.path})"
        )
        problems.extend(probs)
        if parsed is not None:
            out[server] = parsed
    if problems:
        raise DatasetError(problems, f"invalid effective init for {task.id}")
    return out


def effective_init(task: Task, scenario: Scenario, server: str | None = None) -> ServerInit:
    """Effective init of one server (default: the task's only server), ``sources`` included."""
    inits = effective_inits(task, scenario)
    if server is None:
        if len(inits) != 1:
            raise ValueError(f"task {task.id} has servers {sorted(inits)}; pass server=")
        return next(iter(inits.values()))
    try:
        return inits[server]
    except KeyError:
        raise KeyError(f"task {task.id} has no server {server!r} (servers: {sorted(inits)})") from None
