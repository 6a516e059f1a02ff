"""Policy search logic (servers/toolsets/knowledge) against a fake Typesense client:
merge, dedupe, stable sort, clamping, request shape, indexing, error messages."""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

from servers.toolsets import knowledge
from servers.toolsets.knowledge import (
    PolicySearch,
    PolicySearchError,
    PolicySearchInput,
    TypesenseSettings,
    client_from_env,
    effective_max_results,
    index_sources,
    keyword_query,
    make_client,
    search_policy,
)
from servers.toolsets.knowledge.policy_search import words_matched

# text_match values the way Typesense 0.24 builds them: words matched in bits 59+.
ONE_WORD = (1 << 59) | 0x80FFB20000079
TWO_WORDS = (2 << 59) | 0x1017FB18000079


# --------------------------------------------------------------------------- fakes


class FakeMultiSearch:
    def __init__(self, response: Any = None, error: BaseException | None = None) -> None:
        self.response = response
        self.error = error
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def perform(self, body: dict[str, Any], common: dict[str, Any]) -> Any:
        self.calls.append((body, common))
        if self.error is not None:
            raise self.error
        return self.response


class FakeDocuments:
    def __init__(self, owner: FakeCollections) -> None:
        self.owner = owner

    def import_(self, docs: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
        self.owner.imports.append((docs, params))
        if self.owner.import_results is not None:
            return self.owner.import_results
        return [{"success": True} for _ in docs]


class FakeCollection:
    def __init__(self, owner: FakeCollections, name: str) -> None:
        self.owner = owner
        self.name = name
        self.documents = FakeDocuments(owner)

    def retrieve(self) -> dict[str, Any]:
        from typesense.exceptions import ObjectNotFound

        self.owner.retrieved.append(self.name)
        for schema in self.owner.created:
            if schema["name"] == self.name:
                return schema
        if self.owner.missing:
            raise ObjectNotFound("Not Found")
        return {"name": self.name, "fields": knowledge.COLLECTION_FIELDS}


class FakeCollections:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.imports: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        self.import_results: list[dict[str, Any]] | None = None
        self.create_error: BaseException | None = None
        self.retrieved: list[str] = []
        self.missing = False

    def create(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.create_error is not None:
            raise self.create_error
        self.created.append(schema)
        return schema

    def __getitem__(self, name: str) -> FakeCollection:
        return FakeCollection(self, name)


class FakeClient:
    def __init__(self, response: Any = None, error: BaseException | None = None) -> None:
        self.multi_search = FakeMultiSearch(response, error)
        self.collections = FakeCollections()


def hit(
    source: str,
    text: str | None,
    score: int = ONE_WORD,
    distance: float | None = None,
    content: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": "s" + "0" * 32, "source": source, "chunk_index": 0, "num_tokens": 0}
    if text is not None:
        doc["text"] = text
    if content is not None:
        doc["content"] = content
    h: dict[str, Any] = {"document": doc, "text_match": score, "highlights": []}
    if distance is not None:
        h["vector_distance"] = distance
    return h


def grouped(*groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "found": len(groups),
        "grouped_hits": [
            {"group_key": [g[0]["document"]["source"]], "hits": g, "found": len(g)} for g in groups
        ],
    }


def response(first: dict[str, Any], second: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"results": [first, second if second is not None else grouped()]}


def hybrid_response(
    keyword: dict[str, Any], nearest: dict[str, Any], filler: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"results": [keyword, nearest, filler if filler is not None else grouped()]}


def vhit(source: str, text: str, distance: float) -> dict[str, Any]:
    """A nearest-neighbour hit as Typesense 0.24 returns it: a distance, no text_match."""
    h = hit(source, text, distance=distance)
    del h["text_match"]
    return h


def unit(i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(384)]


def sources_of(result: dict[str, Any]) -> list[str]:
    return [s["source"] for s in result["snippets"]]


# --------------------------------------------------------------------------- clamping


@pytest.mark.parametrize(
    ("given", "effective"),
    [(None, 3), (0, 3), (-1, 3), (-100, 3), (1, 1), (2, 2), (3, 3), (7, 7), (10, 10), (11, 10), (1000, 10)],
)
def test_effective_max_results(given: int | None, effective: int) -> None:
    assert effective_max_results(given) == effective


@pytest.mark.parametrize(("given", "count"), [(None, 3), (0, 3), (-4, 3), (1, 1), (5, 5), (10, 10), (99, 10)])
def test_search_clamps_result_count(given: int | None, count: int) -> None:
    groups = [[hit(f"doc{i}.md", f"text {i}")] for i in range(12)]
    client = FakeClient(response(grouped(*groups)))
    result = search_policy(client, "c", "text", given)
    assert len(result["snippets"]) == count


# --------------------------------------------------------------------------- merge


def test_result_shape_and_absent_distance() -> None:
    client = FakeClient(response(grouped([hit("A.md", "alpha text", score=TWO_WORDS)])))
    result = search_policy(client, "c", "alpha", 3)
    assert result == {
        "snippets": [{"source": "A.md", "score": TWO_WORDS, "vector_distance": 2.0, "text": "alpha text"}]
    }
    snippet = result["snippets"][0]
    assert type(snippet["score"]) is int and type(snippet["vector_distance"]) is float


def test_search_two_fills_after_search_one_and_dedupes() -> None:
    first = grouped([hit("B.md", "bravo")], [hit("A.md", "alpha")])
    second = grouped(
        [hit("A.md", "alpha", score=100)],  # duplicate of a search-1 hit: dropped
        [hit("C.md", "charlie", score=100)],
        [hit("D.md", "delta", score=100)],
    )
    result = search_policy(FakeClient(response(first, second)), "c", "zzz", 10)
    assert sources_of(result) == ["B.md", "A.md", "C.md", "D.md"]
    # the kept duplicate is the search-1 one (its score, not search 2's 100)
    assert result["snippets"][1]["score"] == ONE_WORD


def test_same_source_different_text_is_not_a_duplicate() -> None:
    first = grouped([hit("A.md", "part one"), hit("A.md", "part two")])
    second = grouped([hit("A.md", "part one", score=100), hit("A.md", "part three", score=100)])
    result = search_policy(FakeClient(response(first, second)), "c", "zzz", 10)
    assert [s["text"] for s in result["snippets"]] == ["part one", "part two", "part three"]


def test_duplicates_within_one_search_dropped() -> None:
    first = grouped([hit("A.md", "same"), hit("A.md", "same")])
    result = search_policy(FakeClient(response(first)), "c", "zzz", 10)
    assert len(result["snippets"]) == 1


def test_stable_sort_by_vector_distance() -> None:
    first = grouped(
        [hit("far.md", "far", score=TWO_WORDS, distance=0.9)],
        [hit("none1.md", "n1", score=TWO_WORDS)],
        [hit("near.md", "near", score=ONE_WORD, distance=0.1)],
    )
    second = grouped([hit("none2.md", "n2", score=100)], [hit("mid.md", "mid", score=100, distance=0.5)])
    result = search_policy(FakeClient(response(first, second)), "c", "zzz", 10)
    assert sources_of(result) == ["near.md", "mid.md", "far.md", "none1.md", "none2.md"]
    assert [s["vector_distance"] for s in result["snippets"]] == [0.1, 0.5, 0.9, 2.0, 2.0]


def test_clamp_applies_after_sort() -> None:
    first = grouped(
        [hit("a.md", "a")], [hit("b.md", "b")], [hit("c.md", "c")], [hit("d.md", "d", distance=0.3)]
    )
    result = search_policy(FakeClient(response(first)), "c", "zzz", None)
    assert sources_of(result) == ["d.md", "a.md", "b.md"]


def test_text_falls_back_to_content_then_empty() -> None:
    first = grouped([hit("a.md", None, content="from content")], [hit("b.md", None)])
    result = search_policy(FakeClient(response(first)), "c", "zzz", 10)
    assert [s["text"] for s in result["snippets"]] == ["from content", ""]


def test_plain_hits_without_grouping_are_accepted() -> None:
    first = {"found": 1, "hits": [hit("a.md", "alpha")]}
    result = search_policy(FakeClient(response(first)), "c", "alpha", 3)
    assert sources_of(result) == ["a.md"]


def test_more_words_matched_ranks_first() -> None:
    first = grouped([hit("one.md", "refund")], [hit("two.md", "refund window", score=TWO_WORDS)])
    result = search_policy(FakeClient(response(first)), "c", "refund window", 3)
    assert sources_of(result) == ["two.md", "one.md"]


def test_ties_in_words_matched_broken_by_term_frequency() -> None:
    # Typesense 0.24 gives both the same text_match and lists the newer one first.
    first = grouped(
        [hit("Installation.md", "installation steps; a warranty note; scheduling and fees for installation")],
        [hit("Warranty.md", "warranty claims: warranty coverage, warranty periods and warranties")],
    )
    result = search_policy(FakeClient(response(first)), "c", "warranty", 3)
    assert sources_of(result) == ["Warranty.md", "Installation.md"]
    assert result["snippets"][0]["score"] == ONE_WORD  # score stays Typesense's text_match


def test_search_two_fillers_ordered_by_term_frequency() -> None:
    second = grouped(
        [hit("x.md", "nothing relevant", score=100)],
        [hit("y.md", "membership points and membership tiers", score=100)],
    )
    result = search_policy(FakeClient(response(grouped(), second)), "c", "membership", 3)
    assert sources_of(result) == ["y.md", "x.md"]


def test_words_matched_reads_the_top_bits() -> None:
    assert words_matched(ONE_WORD) == 1
    assert words_matched(TWO_WORDS) == 2
    assert words_matched(100) == 0
    assert words_matched(3467833264385818745) == 6  # a real 0.24.1 value


# --------------------------------------------------------------------------- request


def test_multi_search_request_shape() -> None:
    client = FakeClient(response(grouped()))
    search_policy(client, "coll-1", "How do I file a warranty claim?", 3)
    assert len(client.multi_search.calls) == 1
    body, _common = client.multi_search.calls[0]
    s1, s2 = body["searches"]
    for s in (s1, s2):
        assert s["collection"] == "coll-1"
        assert s["group_by"] == "source"
        assert s["per_page"] == 10
        assert s["query_by"] == "text"
        assert s["sort_by"] == "_text_match:desc"
        assert "embedding" not in s["query_by"]
    assert s1["q"] == "file warranty claim"
    assert s2["q"] == ""


@pytest.mark.parametrize(
    ("query", "keywords"),
    [
        ("How do I file a warranty claim?", "file warranty claim"),
        ('-warranty "defect"', "warranty defect"),
        ("what is it", "what is it"),  # only stop words: keep them
        ("", ""),
        ("Return window for VIP customers!", "return window vip customers"),
        ("customer's 30-day return", "customer's 30-day return"),
    ],
)
def test_keyword_query(query: str, keywords: str) -> None:
    assert keyword_query(query) == keywords


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("collection", [None, ""])
def test_no_index_is_service_unavailable(collection: str | None) -> None:
    client = FakeClient(response(grouped()))
    with pytest.raises(PolicySearchError) as err:
        search_policy(client, collection, "warranty", 3)
    assert str(err.value) == "Search service is not available"
    assert client.multi_search.calls == []


def test_no_client_is_service_unavailable() -> None:
    with pytest.raises(PolicySearchError, match=r"^Search service is not available$"):
        search_policy(None, "c", "warranty", 3)


def test_typesense_exception_is_reported_with_detail() -> None:
    client = FakeClient(error=OSError(503, "Not Ready or Lagging"))
    with pytest.raises(PolicySearchError) as err:
        search_policy(client, "c", "warranty", 3)
    assert str(err.value) == "Failed to search articles: [Errno 503] Not Ready or Lagging"


def test_exception_without_text_reports_its_type() -> None:
    client = FakeClient(error=TimeoutError())
    with pytest.raises(PolicySearchError, match=r"^Failed to search articles: TimeoutError$"):
        search_policy(client, "c", "warranty", 3)


@pytest.mark.parametrize("which", [0, 1])
def test_per_search_error_is_a_failure(which: int) -> None:
    results: list[dict[str, Any]] = [grouped(), grouped()]
    results[which] = {"code": 400, "error": "Could not parse the filter query."}
    client = FakeClient({"results": results})
    with pytest.raises(PolicySearchError) as err:
        search_policy(client, "c", "warranty", 3)
    assert str(err.value) == "Failed to search articles: Could not parse the filter query."


def test_missing_collection_is_service_unavailable() -> None:
    # What Typesense 0.24.1 answers for a collection that was never created.
    missing = {"code": 404, "error": "Not found."}
    client = FakeClient({"results": [missing, missing]})
    with pytest.raises(PolicySearchError) as err:
        search_policy(client, "not-indexed", "warranty", 3)
    assert str(err.value) == "Search service is not available"


@pytest.mark.parametrize("bad", [{}, {"results": []}, {"results": [{}]}, {"results": "x"}, ["x"]])
def test_malformed_response_is_a_failure(bad: Any) -> None:
    with pytest.raises(PolicySearchError, match=r"^Failed to search articles: "):
        search_policy(FakeClient(bad), "c", "warranty", 3)


# --------------------------------------------------------------------------- indexing


SOURCES = [
    {"name": "A.md", "snippets": ["alpha one", "alpha two"]},
    {"name": "B.md", "snippets": ["bravo"]},
]


def test_index_sources_one_bulk_import() -> None:
    client = FakeClient()
    assert index_sources(client, "coll", SOURCES) == 3
    (schema,) = client.collections.created
    assert schema["name"] == "coll"
    fields = {f["name"]: f for f in schema["fields"]}
    assert set(fields) == {"source", "chunk_index", "num_tokens", "content", "text"}
    assert fields["source"]["facet"] is True
    assert fields["chunk_index"]["type"] == fields["num_tokens"]["type"] == "int32"
    assert len(client.collections.imports) == 1  # one request, not one per document
    docs, params = client.collections.imports[0]
    assert params == {"action": "create"}
    assert [(d["source"], d["text"]) for d in docs] == [
        ("A.md", "alpha one"),
        ("A.md", "alpha two"),
        ("B.md", "bravo"),
    ]
    for d in docs:
        assert re.fullmatch(r"s[0-9a-f]{32}", d["id"])
        assert d["content"] == d["text"]
        assert d["chunk_index"] == 0 and d["num_tokens"] == 0
    assert len({d["id"] for d in docs}) == 3


def test_index_no_sources_creates_nothing() -> None:
    client = FakeClient()
    assert index_sources(client, "coll", []) == 0
    assert client.collections.created == [] and client.collections.imports == []


def test_index_sources_without_snippets_creates_empty_collection() -> None:
    client = FakeClient()
    assert index_sources(client, "coll", [{"name": "A.md", "snippets": []}]) == 0
    assert len(client.collections.created) == 1 and client.collections.imports == []


def test_index_reports_failed_documents() -> None:
    client = FakeClient()
    client.collections.import_results = [
        {"success": True},
        {"success": False, "error": "bad"},
        {"success": True},
    ]
    with pytest.raises(PolicySearchError, match=r"^Failed to index policy sources: 1 of 3 documents failed"):
        index_sources(client, "coll", SOURCES)


def test_index_reports_typesense_errors() -> None:
    client = FakeClient()
    client.collections.create_error = OSError(409, "A collection with name `coll` already exists.")
    with pytest.raises(PolicySearchError, match=r"^Failed to index policy sources: .*already exists"):
        index_sources(client, "coll", SOURCES)


@pytest.mark.parametrize(
    "bad",
    [[{"snippets": ["x"]}], [{"name": "", "snippets": ["x"]}], [{"name": "A", "snippets": "x"}], ["A.md"]],
)
def test_index_rejects_malformed_sources(bad: Any) -> None:
    with pytest.raises(ValueError):
        index_sources(FakeClient(), "coll", bad)


def test_new_collection_name_is_uuid4() -> None:
    name = knowledge.new_collection_name()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", name)


# --------------------------------------------------------------------------- input model


def test_input_model_defaults_and_extra_forbidden() -> None:
    assert PolicySearchInput(query="x").max_results == 3
    assert PolicySearchInput(query="x", max_results=None).max_results is None
    assert PolicySearchInput.model_validate({"query": "x", "max_results": "5"}).max_results == 5  # lax
    with pytest.raises(pydantic.ValidationError) as err:
        PolicySearchInput.model_validate({"query": "x", "category": "returns"})
    assert err.value.errors()[0]["loc"] == ("category",)
    assert err.value.errors()[0]["msg"] == "Extra inputs are not permitted"
    with pytest.raises(pydantic.ValidationError):
        PolicySearchInput.model_validate({"max_results": 3})
    schema = PolicySearchInput.model_json_schema()
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False


# --------------------------------------------------------------------------- configuration


def test_settings_from_env() -> None:
    s = TypesenseSettings.from_env(
        {
            "TBX_TYPESENSE_URL": "http://10.1.2.3:8108",
            "TBX_TYPESENSE_API_KEY": "k",
            "TBX_TYPESENSE_COLLECTION": "c",
        }
    )
    assert s == TypesenseSettings(url="http://10.1.2.3:8108", api_key="k", collection="c")
    empty = TypesenseSettings.from_env({"TBX_TYPESENSE_URL": "", "TBX_TYPESENSE_COLLECTION": " "})
    assert empty.url is None and empty.collection is None and empty.api_key == "tbx"


def test_client_from_env() -> None:
    assert client_from_env({}) is None
    client = client_from_env({"TBX_TYPESENSE_URL": "http://10.1.2.3:8108", "TBX_TYPESENSE_API_KEY": "k"})
    assert client is not None
    node = client.config.nodes[0]
    assert (node.host, int(node.port), node.protocol) == ("10.1.2.3", 8108, "http")
    assert client.config.api_key == "k"
    assert client.config.connection_timeout_seconds <= 5
    assert client.config.num_retries <= 2


def test_make_client_defaults_port() -> None:
    node = make_client("http://typesense", "k").config.nodes[0]
    assert (node.host, int(node.port)) == ("typesense", 8108)
    with pytest.raises(ValueError):
        make_client("http://:8108", "k")


def test_policy_search_from_env_without_collection_is_unavailable() -> None:
    search = PolicySearch.from_env(
        {"TBX_TYPESENSE_URL": "http://10.1.2.3:8108", "TBX_TYPESENSE_COLLECTION": ""}
    )
    with pytest.raises(PolicySearchError, match=r"^Search service is not available$"):
        search.search("warranty")


def test_policy_search_runs_input_model() -> None:
    client = FakeClient(response(grouped([hit("a.md", "alpha")])))
    search = PolicySearch(client, "c")
    assert sources_of(search.run(PolicySearchInput(query="alpha", max_results=0))) == ["a.md"]


# --------------------------------------------------------------------------- hybrid (vectors)


def test_hybrid_request_shape() -> None:
    client = FakeClient(hybrid_response(grouped(), grouped()))
    search_policy(client, "coll-1", "How do I file a warranty claim?", 3, embed=lambda q: [0.5] * 384)
    body, _common = client.multi_search.calls[0]
    keyword, nearest, filler = body["searches"]
    for s in (keyword, nearest, filler):
        assert s["collection"] == "coll-1"
        assert s["group_by"] == "source" and s["per_page"] == 10
        assert set(s["exclude_fields"].split(",")) == {"content", "embedding"}
    assert keyword["q"] == "file warranty claim" and keyword["query_by"] == "text"
    assert filler["q"] == "" and filler["query_by"] == "text"
    assert nearest["q"] == "*"  # Typesense 0.24: vector queries only on wildcard searches
    assert "query_by" not in nearest
    m = re.fullmatch(r"embedding:\(\[(.*)\], k:10\)", nearest["vector_query"])
    assert m is not None
    assert [float(x) for x in m.group(1).split(",")] == [0.5] * 384


def test_hybrid_orders_by_vector_distance_and_keeps_keyword_scores() -> None:
    keyword = grouped([hit("kw-only.md", "k", score=TWO_WORDS)], [hit("both.md", "b", score=ONE_WORD)])
    nearest = grouped(
        [vhit("vec-only.md", "v", 0.12)], [vhit("both.md", "b", 0.30)], [vhit("far.md", "f", 0.90)]
    )
    filler = grouped([hit("filler.md", "x", score=100)], [hit("both.md", "b", score=100)])
    result = search_policy(
        FakeClient(hybrid_response(keyword, nearest, filler)), "c", "q", 10, embed=lambda q: unit(0)
    )
    assert result == {
        "snippets": [
            {"source": "vec-only.md", "score": 0, "vector_distance": 0.12, "text": "v"},
            {"source": "both.md", "score": ONE_WORD, "vector_distance": 0.30, "text": "b"},
            {"source": "far.md", "score": 0, "vector_distance": 0.90, "text": "f"},
            # no vector hit: the spec's 2.0, keyword hits before the filler
            {"source": "kw-only.md", "score": TWO_WORDS, "vector_distance": 2.0, "text": "k"},
            {"source": "filler.md", "score": 100, "vector_distance": 2.0, "text": "x"},
        ]
    }


def test_hybrid_clamps_after_the_distance_sort() -> None:
    nearest = grouped(*[[vhit(f"d{i}.md", f"t{i}", 0.1 * (12 - i))] for i in range(12)])
    client = FakeClient(hybrid_response(grouped(), nearest))
    for given, count in [(None, 3), (0, 3), (-1, 3), (4, 4), (11, 10)]:
        result = search_policy(client, "c", "q", given, embed=lambda q: unit(0))
        assert sources_of(result) == [f"d{i}.md" for i in range(11, 11 - count, -1)]


def test_hybrid_same_source_different_text_kept_and_duplicates_dropped() -> None:
    nearest = grouped([vhit("A.md", "one", 0.2), vhit("A.md", "two", 0.1), vhit("A.md", "one", 0.2)])
    result = search_policy(
        FakeClient(hybrid_response(grouped(), nearest)), "c", "q", 10, embed=lambda q: unit(0)
    )
    assert [(s["source"], s["text"]) for s in result["snippets"]] == [("A.md", "two"), ("A.md", "one")]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_hybrid_per_search_error_is_a_failure(which: int) -> None:
    results: list[dict[str, Any]] = [grouped(), grouped(), grouped()]
    results[which] = {"code": 400, "error": "Vector query is supported only on wildcard (q=*) searches."}
    with pytest.raises(PolicySearchError) as err:
        search_policy(FakeClient({"results": results}), "c", "q", 3, embed=lambda q: unit(0))
    assert (
        str(err.value)
        == "Failed to search articles: Vector query is supported only on wildcard (q=*) searches."
    )


def test_embedding_failure_is_a_search_failure() -> None:
    def broken(query: str) -> list[float]:
        raise knowledge.EmbeddingUnavailable("this CPU lacks AVX2")

    client = FakeClient(hybrid_response(grouped(), grouped()))
    with pytest.raises(PolicySearchError, match=r"^Failed to search articles: this CPU lacks AVX2$"):
        search_policy(client, "c", "q", 3, embed=broken)
    assert client.multi_search.calls == []


def test_index_with_embeddings_adds_the_vector_field() -> None:
    client = FakeClient()
    vectors = [unit(0), unit(1), unit(2)]
    assert index_sources(client, "coll", SOURCES, embeddings=vectors) == 3
    (schema,) = client.collections.created
    assert schema["fields"][-1] == {"name": "embedding", "type": "float[]", "num_dim": 384}
    docs, _ = client.collections.imports[0]
    assert [d["embedding"] for d in docs] == vectors
    assert knowledge.snippet_texts(SOURCES) == [d["text"] for d in docs]


@pytest.mark.parametrize("vectors", [[unit(0)], [unit(0), unit(1), [0.0] * 3]])
def test_index_rejects_wrong_embeddings(vectors: list[list[float]]) -> None:
    client = FakeClient()
    with pytest.raises(ValueError):
        index_sources(client, "coll", SOURCES, embeddings=vectors)
    assert client.collections.created == []


def test_server_follows_what_the_collection_was_indexed_with() -> None:
    queries: list[str] = []

    def embed(query: str) -> list[float]:
        queries.append(query)
        return unit(3)

    # a hybrid collection: the server embeds the query and runs three searches
    client = FakeClient(hybrid_response(grouped(), grouped([vhit("a.md", "alpha", 0.2)])))
    index_sources(client, "c", [{"name": "a.md", "snippets": ["alpha"]}], embeddings=[unit(3)])
    search = PolicySearch(client, "c", embed=embed)
    assert search.search("alpha words", 3)["snippets"][0]["vector_distance"] == 0.2
    search.search("again", 3)
    assert queries == ["alpha words", "again"]
    assert search.mode == "hybrid" and client.collections.retrieved == ["c"]  # schema read once
    assert len(client.multi_search.calls[0][0]["searches"]) == 3

    # a keyword collection: the embedder is never called
    client = FakeClient(response(grouped([hit("a.md", "alpha")])))
    search = PolicySearch(client, "c", embed=embed)
    assert sources_of(search.search("alpha", 3)) == ["a.md"]
    assert search.mode == "keyword" and queries == ["alpha words", "again"]
    assert len(client.multi_search.calls[0][0]["searches"]) == 2


def test_server_reports_a_missing_collection_as_unavailable_and_retries_later() -> None:
    client = FakeClient(response(grouped([hit("a.md", "alpha")])))
    client.collections.missing = True
    search = PolicySearch(client, "c", embed=lambda q: unit(0))
    with pytest.raises(PolicySearchError, match=r"^Search service is not available$"):
        search.search("alpha")
    assert search.mode is None  # not cached: the collection may still be created
    client.collections.missing = False
    assert sources_of(search.search("alpha")) == ["a.md"]
