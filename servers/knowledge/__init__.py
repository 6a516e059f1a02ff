"""Policy knowledge base: the `search_policy` / `knowledge_base_search_policy` tool logic.

See :mod:`servers.knowledge.policy_search` for the search design (keyword search
on Typesense 0.24.1, ``vector_distance`` always 2.0) and why.
"""

from .policy_search import (
    COLLECTION_FIELDS,
    DEFAULT_MAX_RESULTS,
    MAX_MAX_RESULTS,
    SERVICE_UNAVAILABLE,
    PolicySearch,
    PolicySearchError,
    PolicySearchInput,
    TypesenseSettings,
    build_documents,
    client_from_env,
    drop_collection,
    effective_max_results,
    index_sources,
    keyword_query,
    make_client,
    merge_results,
    new_collection_name,
    search_policy,
)

__all__ = [
    "COLLECTION_FIELDS",
    "DEFAULT_MAX_RESULTS",
    "MAX_MAX_RESULTS",
    "SERVICE_UNAVAILABLE",
    "PolicySearch",
    "PolicySearchError",
    "PolicySearchInput",
    "TypesenseSettings",
    "build_documents",
    "client_from_env",
    "drop_collection",
    "effective_max_results",
    "index_sources",
    "keyword_query",
    "make_client",
    "merge_results",
    "new_collection_name",
    "search_policy",
]
