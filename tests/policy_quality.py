"""Retrieval quality of the policy search on our labelled queries
(tests/data/policy_queries.yaml): recall@3 and MRR per domain, for any search
given as a function from query text to the ranked source names.

Used by tests/integration/servers/toolsets/test_policy_search_quality.py and
benchmarks/policy_search.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

QUERIES = Path(__file__).resolve().parent / "data" / "policy_queries.yaml"
K = 3


class LabelledQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    q: str = Field(min_length=1)
    kind: Literal["paraphrase", "question", "keywords"]
    answers: list[str] = Field(min_length=1)


def load_queries(path: Path = QUERIES) -> dict[str, list[LabelledQuery]]:
    raw = yaml.safe_load(path.read_text())
    return {domain: [LabelledQuery.model_validate(x) for x in items] for domain, items in raw.items()}


@dataclass(frozen=True)
class Quality:
    n: int
    recall_at_3: float  # share of queries with an answering document in the first 3
    mrr: float  # mean of 1 / rank of the first answering document (0 if none returned)

    def __str__(self) -> str:
        return f"R@3 {self.recall_at_3:.3f}  MRR {self.mrr:.3f}  (n={self.n})"


def rank_of(ranked: list[str], answers: Iterable[str]) -> int | None:
    """1-based rank of the first answering source, None when none is in the list."""
    wanted = set(answers)
    return next((i for i, s in enumerate(ranked, 1) if s in wanted), None)


def quality(ranks: list[int | None]) -> Quality:
    n = len(ranks)
    return Quality(
        n=n,
        recall_at_3=sum(1 for r in ranks if r is not None and r <= K) / n,
        mrr=sum(1 / r for r in ranks if r is not None) / n,
    )


def measure(
    search: Callable[[str], list[str]], queries: list[LabelledQuery], kind: str | None = None
) -> tuple[Quality, list[tuple[LabelledQuery, int | None]]]:
    """Quality of ``search`` over ``queries`` (optionally one kind), plus each query's rank."""
    picked = [q for q in queries if kind is None or q.kind == kind]
    ranks = [(q, rank_of(search(q.q), q.answers)) for q in picked]
    return quality([r for _, r in ranks]), ranks


def scenario_sources(benchmark: Any, domain: str) -> list[dict[str, Any]]:
    """The policy documents a domain's attempts get (one set per scenario in v1.0)."""
    task = next(t for t in benchmark.tasks if t.domain == domain)
    return [s.model_dump() for s in benchmark.effective_init(task).sources]
