"""How many sandboxes each served domain keeps ready (bench.env.host.warm_sizes)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.dataset import Task
from bench.env.host import warm_sizes


def _tasks(*domains: str) -> list[Task]:
    return [
        Task(id=f"f.py:t{i}", file="f.py", uid=f"t{i}", source="s", scenario="sc", domain=d, query="q")
        for i, d in enumerate(domains)
    ]


def test_given_warm_applies_to_every_domain() -> None:
    assert warm_sizes(_tasks("retail", "travel"), 8, 3) == {"retail": 3, "travel": 3}


def test_default_shares_the_total_by_served_tasks() -> None:
    assert warm_sizes(_tasks("retail", "retail", "retail", "travel"), 8, None) == {"retail": 2, "travel": 1}
    assert warm_sizes(_tasks("retail"), 8, None) == {"retail": 2}


def test_default_never_exceeds_max_episodes_but_keeps_one_per_domain() -> None:
    assert warm_sizes(_tasks("retail"), 1, None) == {"retail": 1}
    assert warm_sizes(_tasks("retail", "travel", "hr"), 1, None) == {"retail": 1, "travel": 1, "hr": 1}


def test_provider_sizes_each_pool_and_plans_it_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sizes reach the provider's pools (one per domain), and a planned domain's
    pool gets its preparers before it boots (the one-task plan of bench.env.host)."""
    import sandbox.provider as provider_mod
    from sandbox import DockerProvider, SandboxRequest, Upcoming

    made: dict[str, Any] = {}

    class FakePool:
        def __init__(self, domains: list[str], *, size: int, **_: Any):
            self.size, self.planned = size, None
            made[",".join(domains)] = self

        def plan(self, upcoming: Any, *, again: bool = False) -> None:
            self.planned, self.again = list(upcoming), again

        async def __aenter__(self) -> FakePool:
            return self

    monkeypatch.setattr(provider_mod, "SandboxPool", FakePool)
    provider = DockerProvider(warm=3, sizes={"retail": 1})
    prep = object()
    provider.plan({}, [Upcoming(["retail"], lambda: prep)] * 4, again=True)  # type: ignore[arg-type,return-value]

    async def go() -> None:
        for domain in ("retail", "travel"):
            await provider.warm_up(SandboxRequest(domains=[domain]))

    asyncio.run(go())
    assert made["retail"].size == 1 and made["travel"].size == 3
    assert len(made["retail"].planned) == 4 and made["retail"].again and made["travel"].planned is None
