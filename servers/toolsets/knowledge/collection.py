"""The policy collection as both of its sides see it: the host that fills it
(:mod:`.indexing`, while a sandbox is prepared) and the tool server that searches
it (:mod:`.policy_search`, in the container). One home for what they must agree
on: the collection's fields, the search modes an index can serve, the client
that reaches a Typesense node, and the error (with its exact messages) both report.

Imports nothing heavy: `bench.defaults` reads the search modes from here while the
CLI builds its parser.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlparse

from .embedding import DIM  # the module imports nothing but the standard library until a model loads

if TYPE_CHECKING:
    import ssl

    import typesense

# The search a collection serves, decided by what was indexed: vector + keyword
# hybrid (documents indexed with their embeddings) or the keyword-only fallback.
SearchMode = Literal["hybrid", "keyword"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "keyword")
DEFAULT_SEARCH: SearchMode = "hybrid"

# The spec's fields; `id` is implicit in Typesense and not declared. The
# `embedding` field (EMBEDDING_FIELD) is added when vectors are indexed.
SOURCE = "source"  # the policy document a snippet comes from (searches group by it)
TEXT = "text"  # the snippet, what the keyword search reads
CONTENT = "content"  # identical to `text` by construction; never part of an answer
COLLECTION_FIELDS: list[dict[str, Any]] = [
    {"name": SOURCE, "type": "string", "facet": True},
    {"name": "chunk_index", "type": "int32"},
    {"name": "num_tokens", "type": "int32"},
    {"name": CONTENT, "type": "string"},
    {"name": TEXT, "type": "string"},
]
EMBEDDING = "embedding"
# As many dimensions as the model's vectors (its own constant: the model decides them).
EMBEDDING_FIELD: dict[str, Any] = {"name": EMBEDDING, "type": "float[]", "num_dim": DIM}

SERVICE_UNAVAILABLE = "Search service is not available"
SEARCH_FAILED_PREFIX = "Failed to search articles: "
INDEX_FAILED_PREFIX = "Failed to index policy sources: "

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_RETRIES = 1


class PolicySearchError(Exception):
    """A policy-search failure; ``str(exc)`` is the exact message the tool reports."""


def detail(exc: BaseException) -> str:
    """What a failure message says after its prefix."""
    text = str(exc)
    return text if text else type(exc).__name__


class TypesenseLike(Protocol):
    """The part of ``typesense.Client`` the knowledge toolset uses (lets tests pass a fake)."""

    @property
    def collections(self) -> Any: ...

    @property
    def multi_search(self) -> Any: ...


def handle(client: TypesenseLike, name: str) -> Any:
    """The client's handle on one collection."""
    with warnings.catch_warnings():  # the v30 client warns about v0.x-era sub-APIs on access
        warnings.simplefilter("ignore", DeprecationWarning)
        return client.collections[name]


def make_client(
    url: str,
    api_key: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retries: int = DEFAULT_RETRIES,
    verify: bool | ssl.SSLContext = True,
) -> typesense.Client:
    """A ``typesense.Client`` for one node at ``url`` (``http://host[:port]``, port defaults to 8108).

    Short timeout, few quick retries: the server is per-attempt local infra, a
    slow answer means it is broken, not busy.
    """
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
        "verify": verify,  # a shared context spares the host a CA-bundle load per client
    }
    with warnings.catch_warnings():  # the client warns about its own analytics v1 attribute
        warnings.simplefilter("ignore", DeprecationWarning)
        return typesense.Client(config)
