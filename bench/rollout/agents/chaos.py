"""`chaos`: the golden calls with seeded, reproducible mistakes.

Each golden call is perturbed with probability `rate`; the perturbation is
drawn from `kinds`:

- `drop_write`    skip a call that writes (read calls are never dropped)
- `alter_value`   change one leaf value of the arguments
- `extra_call`    send the call twice
- `invalid_args`  add an argument no tool accepts, or send argument text that is not JSON
- `stop_early`    end the conversation before this call

The random stream is seeded by (task id, seed): the same pair always gives
the same perturbed call list, whatever the process or machine. It exercises
the judge's labelled differences and the runner's error paths.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bench.dataset import Benchmark, Task
from bench.dataset.domains import server_module
from bench.rollout.agents.base import REPLAY_FINAL, PlanAgent, PlannedCall

Kind = Literal["drop_write", "alter_value", "extra_call", "invalid_args", "stop_early"]
KINDS: tuple[Kind, ...] = ("drop_write", "alter_value", "extra_call", "invalid_args", "stop_early")
DEFAULT_RATE = 0.3
UNKNOWN_ARG = "chaos_unexpected_argument"
BROKEN_JSON = '{"chaos": '

_READ_WORDS = frozenset(
    {
        "get",
        "list",
        "search",
        "check",
        "lookup",
        "find",
        "query",
        "view",
        "fetch",
        "read",
        "describe",
        "status",
    }
)


class Perturbation(BaseModel):
    index: int  # position in the golden call list
    tool: str
    kind: Kind
    detail: str = ""


class ChaosPlan(BaseModel):
    seed: str
    rate: float
    calls: list[tuple[str, dict[str, Any] | str]] = Field(default_factory=list)
    perturbations: list[Perturbation] = Field(default_factory=list)


def looks_like_read(tool: str) -> bool:
    return bool(_READ_WORDS & set(tool.lower().split("_")))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [(path, value)]


def _altered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.randint(1, 9)
    if isinstance(value, float):
        return round(value + rng.uniform(1, 10), 2)
    if isinstance(value, str):
        return f"{value}-chaos{rng.randint(10, 99)}" if value else "chaos"
    return "chaos"  # None


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def perturb(
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    seed: int | str,
    rate: float = DEFAULT_RATE,
    kinds: Sequence[Kind] = KINDS,
    is_write: Callable[[str], bool] = lambda tool: not looks_like_read(tool),
) -> ChaosPlan:
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"chaos rate must be within [0, 1], got {rate}")
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ValueError(f"chaos kinds must be a non-empty subset of {', '.join(KINDS)}")
    rng = random.Random(f"tbx-chaos:{seed}")
    plan = ChaosPlan(seed=str(seed), rate=rate)
    for i, (tool, params) in enumerate(calls):
        args = copy.deepcopy(params)
        if rng.random() >= rate:
            plan.calls.append((tool, args))
            continue
        leaves = [(p, v) for p, v in _leaves(args) if p]
        options = [
            k for k in kinds if (k != "drop_write" or is_write(tool)) and (k != "alter_value" or leaves)
        ]
        if not options:
            plan.calls.append((tool, args))
            continue
        kind = rng.choice(options)
        pert = Perturbation(index=i, tool=tool, kind=kind)
        plan.perturbations.append(pert)
        if kind == "stop_early":
            pert.detail = f"stopped before call {i}"
            break
        if kind == "drop_write":
            pert.detail = "call dropped"
        elif kind == "alter_value":
            path, old = rng.choice(leaves)
            new = _altered(old, rng)
            _set(args, path, new)
            pert.detail = f"{'.'.join(str(p) for p in path)}: {old!r} -> {new!r}"
            plan.calls.append((tool, args))
        elif kind == "extra_call":
            pert.detail = "sent twice"
            plan.calls.extend([(tool, args), (tool, copy.deepcopy(args))])
        else:  # invalid_args
            if rng.random() < 0.5:
                pert.detail = f"unknown argument {UNKNOWN_ARG!r}"
                plan.calls.append((tool, {**args, UNKNOWN_ARG: True}))
            else:
                pert.detail = "argument text is not JSON"
                plan.calls.append((tool, BROKEN_JSON))
    return plan


@cache
def _writes_state(tools_json: Path) -> dict[str, bool | None]:
    try:
        data = json.loads(tools_json.read_text())
    except (OSError, ValueError):
        return {}
    return {t["name"]: t.get("writes_state") for t in data.get("agent_tools", []) if "name" in t}


def write_classifier(bench: Benchmark, task: Task) -> Callable[[str], bool]:
    """`writes_state` from the export's tools.json where known, else a name heuristic."""
    known: dict[str, bool | None] = {}
    if task.server:
        known = _writes_state(bench.root / "servers" / server_module(task.server) / "tools.json")

    def is_write(tool: str) -> bool:
        flag = known.get(tool)
        return (not looks_like_read(tool)) if flag is None else flag

    return is_write


def chaos_plan(
    bench: Benchmark, task: Task, seed: int, rate: float = DEFAULT_RATE, kinds: Sequence[Kind] = KINDS
) -> ChaosPlan:
    golden = [(t, a) for t, a in bench.golden_calls(task) if isinstance(a, dict)]
    return perturb(
        golden, seed=f"{task.id}:{seed}", rate=rate, kinds=kinds, is_write=write_classifier(bench, task)
    )


def chaos_agent(
    bench: Benchmark, task: Task, seed: int, rate: float = DEFAULT_RATE, kinds: Sequence[Kind] = KINDS
) -> tuple[PlanAgent, ChaosPlan]:
    plan = chaos_plan(bench, task, seed, rate, kinds)
    calls: list[PlannedCall] = list(plan.calls)
    return PlanAgent(calls, final=REPLAY_FINAL), plan
