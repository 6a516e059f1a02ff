"""From a task to the sandbox request that starts its attempt: the domain's
base seed rows plus the task's data_patch (upsert), and the scenario's
policy documents. Nothing golden goes into the request."""

from __future__ import annotations

from typing import Any

from bench.dataset import Benchmark, Task
from sandbox.sandbox import SandboxRequest
from servers.engine.seeding import initial_rows
from servers.registry import load_domain


def initial_state(bench: Benchmark, task: Task) -> dict[str, list[dict[str, Any]]]:
    domain = load_domain(task.domain)
    init = bench.effective_init(task)
    return initial_rows(domain.tables, bench.seed(domain.module), init.data_patch)


def sandbox_request(bench: Benchmark, task: Task, *, typesense: bool = True, **kwargs: Any) -> SandboxRequest:
    init = bench.effective_init(task)
    return SandboxRequest(
        domains=[task.domain],
        seed={task.domain: initial_state(bench, task)},
        policy_sources=[s.model_dump() for s in init.sources] if typesense else [],
        typesense=typesense,
        **kwargs,
    )
