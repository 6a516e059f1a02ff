"""How many sandboxes each served domain keeps ready (bench.env.host.warm_sizes)."""

from __future__ import annotations

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
