"""Policy knowledge base: the `search_policy` / `knowledge_base_search_policy` tool logic.

See :mod:`servers.knowledge.policy_search` for the search design (hybrid
keyword + vector search on Typesense 0.24.1, or keyword only) and
:mod:`servers.knowledge.embedding` for the embedding model.
"""

from .embedding import E5, EmbeddingUnavailable, document_vectors, model_id
from .policy_search import (
    COLLECTION_FIELDS,
    DEFAULT_MAX_RESULTS,
    DEFAULT_SEARCH,
    EMBEDDING_FIELD,
    MAX_MAX_RESULTS,
    SEARCH_MODES,
    SERVICE_UNAVAILABLE,
    PolicySearch,
    PolicySearchError,
    PolicySearchInput,
    SearchMode,
    TypesenseSettings,
    build_documents,
    client_from_env,
    collection_mode,
    drop_collection,
    effective_max_results,
    index_sources,
    keyword_query,
    make_client,
    merge_results,
    new_collection_name,
    search_policy,
    snippet_texts,
)

__all__ = [
    "COLLECTION_FIELDS",
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_SEARCH",
    "E5",
    "EMBEDDING_FIELD",
    "MAX_MAX_RESULTS",
    "SEARCH_MODES",
    "SERVICE_UNAVAILABLE",
    "EmbeddingUnavailable",
    "PolicySearch",
    "PolicySearchError",
    "PolicySearchInput",
    "SearchMode",
    "TypesenseSettings",
    "build_documents",
    "client_from_env",
    "collection_mode",
    "document_vectors",
    "drop_collection",
    "effective_max_results",
    "index_sources",
    "keyword_query",
    "make_client",
    "merge_results",
    "model_id",
    "new_collection_name",
    "search_policy",
    "snippet_texts",
]
