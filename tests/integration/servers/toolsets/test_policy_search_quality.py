"""Retrieval quality of the policy search on a real Typesense 0.24.1, hybrid
(vectors from the pinned embedding model) vs the keyword fallback, on our
labelled queries (tests/data/policy_queries.yaml, tests/policy_quality.py).

Fails when recall@3 or MRR of either search falls below what we measured and
wrote down in docs/servers.md, or when the hybrid search stops beating the
keyword search on paraphrases (queries avoiding the documents' words). The
document vectors come from the host cache (~/.cache/tbx/embeddings): the first
run on a machine embeds the 45 policy documents once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from policy_quality import Quality, load_queries, measure, quality, scenario_sources
from typesense_container import Running

from servers.toolsets import knowledge
from servers.toolsets.knowledge import E5, document_vectors, index_sources, search_policy, snippet_texts

pytestmark = pytest.mark.docker

# Measured on 2026-12-01 (docs/servers.md), printed to 3 decimals; the search is
# deterministic, so anything below (beyond the rounding) is a change.
# domain -> search -> (recall@3, MRR).
FLOORS: dict[str, dict[str, tuple[float, float]]] = {
    "retail": {"keyword": (0.833, 0.705), "hybrid": (0.861, 0.758)},
    "auto_insurance": {"keyword": (0.879, 0.810), "hybrid": (0.879, 0.867)},
    "consulting": {"keyword": (0.900, 0.772), "hybrid": (0.933, 0.833)},
    "neobank": {"keyword": (0.893, 0.807), "hybrid": (0.893, 0.815)},
    "travel": {"keyword": (0.743, 0.685), "hybrid": (0.800, 0.729)},
    "overall": {"keyword": (0.846, 0.752), "hybrid": (0.870, 0.798)},
}
ROUNDING = 0.0005

QUERIES = load_queries()


@pytest.fixture(scope="module")
def e5() -> E5:
    return E5(threads=1)


@pytest.fixture(scope="module")
def searches(typesense: Running, benchmark: Any, e5: E5) -> dict[str, dict[str, Callable[[str], list[str]]]]:
    """domain -> {"keyword": search, "hybrid": search}, each returning ranked source names."""
    client = typesense.client(timeout_s=30)
    out: dict[str, dict[str, Callable[[str], list[str]]]] = {}
    for domain in QUERIES:
        sources = scenario_sources(benchmark, domain)
        kw, hy = knowledge.new_collection_name(), knowledge.new_collection_name()
        index_sources(client, kw, sources)
        index_sources(client, hy, sources, embeddings=document_vectors(snippet_texts(sources)))

        def run(collection: str, embed: Callable[[str], list[float]] | None) -> Callable[[str], list[str]]:
            def search(query: str) -> list[str]:
                result = search_policy(client, collection, query, 10, embed)
                return [s["source"] for s in result["snippets"]]

            return search

        out[domain] = {"keyword": run(kw, None), "hybrid": run(hy, e5.query)}
    return out


def test_labelled_queries_name_real_documents(benchmark: Any) -> None:
    for domain, queries in QUERIES.items():
        names = {s["name"] for s in scenario_sources(benchmark, domain)}
        assert len(queries) >= 3 * len(names), domain  # several queries per document
        for q in queries:
            assert set(q.answers) <= names, (domain, q.q)
        assert {q.answers[0] for q in queries} == names, f"{domain}: every document answers some query"


def test_quality_does_not_drop(searches: dict[str, dict[str, Callable[[str], list[str]]]]) -> None:
    measured: dict[str, dict[str, Quality]] = {}
    ranks: dict[str, list[int | None]] = {"keyword": [], "hybrid": []}
    for domain, queries in QUERIES.items():
        for name, search in searches[domain].items():
            q, per_query = measure(search, queries)
            measured.setdefault(domain, {})[name] = q
            ranks[name].extend(r for _, r in per_query)
            print(f"{domain:15s} {name:8s} {q}")
    for name in ("keyword", "hybrid"):
        measured.setdefault("overall", {})[name] = overall = quality(ranks[name])
        print(f"{'overall':15s} {name:8s} {overall}")
        for kind in ("paraphrase", "question", "keywords"):
            picked = [r for domain, queries in QUERIES.items() for r in _ranks(searches, domain, name, kind)]
            print(f"{'  ' + kind:15s} {name:8s} {quality(picked)}")
    assert set(FLOORS) == set(measured)
    for domain, by_search in FLOORS.items():
        for name, (recall, mrr) in by_search.items():
            got = measured[domain][name]
            assert got.recall_at_3 + ROUNDING >= recall and got.mrr + ROUNDING >= mrr, (domain, name, got)


def _ranks(
    searches: dict[str, dict[str, Callable[[str], list[str]]]], domain: str, name: str, kind: str
) -> list[int | None]:
    return [r for _, r in measure(searches[domain][name], QUERIES[domain], kind=kind)[1]]


def test_hybrid_beats_keyword_on_paraphrases(
    searches: dict[str, dict[str, Callable[[str], list[str]]]],
) -> None:
    ranks: dict[str, list[int | None]] = {"keyword": [], "hybrid": []}
    for domain, queries in QUERIES.items():
        for name, search in searches[domain].items():
            ranks[name].extend(r for _, r in measure(search, queries, kind="paraphrase")[1])
    kw, hy = quality(ranks["keyword"]), quality(ranks["hybrid"])
    print(f"paraphrases: keyword {kw} | hybrid {hy}")
    assert hy.recall_at_3 > kw.recall_at_3 and hy.mrr > kw.mrr


def test_hybrid_results_keep_the_shape_and_carry_distances(
    typesense: Running, benchmark: Any, e5: E5
) -> None:
    sources = scenario_sources(benchmark, "retail")
    texts = {s["name"]: s["snippets"][0] for s in sources}
    client = typesense.client(timeout_s=30)
    collection = knowledge.new_collection_name()
    index_sources(client, collection, sources, embeddings=document_vectors(snippet_texts(sources)))
    result = search_policy(client, collection, "late parcel compensation", None, e5.query)
    snippets = result["snippets"]
    assert len(snippets) == 3
    distances = [s["vector_distance"] for s in snippets]
    assert distances == sorted(distances) and all(0.0 <= d < 1.0 for d in distances)
    for s in snippets:
        assert set(s) == {"source", "score", "vector_distance", "text"}
        assert isinstance(s["score"], int) and s["text"] == texts[s["source"]]
    assert "Order Status and Tracking.md" in [s["source"] for s in snippets]
    # the server side: the same collection answers through PolicySearch, which detects the mode
    search = knowledge.PolicySearch(client, collection, embed=e5.query)
    assert search.search("late parcel compensation", None) == result
    assert search.mode == "hybrid"
    assert len(search_policy(client, collection, "x", 50, e5.query)["snippets"]) == 9  # 10 -> all 9
