"""Policy knowledge base: the `search_policy` / `knowledge_base_search_policy` tool logic.

Three sides, one module each: :mod:`.collection` holds what they agree on (the
collection's fields, the search modes, the client, the error),
:mod:`.indexing` fills a collection on the host while a sandbox is prepared
(documents, their cached vectors), and :mod:`.policy_search` is what the tool
server runs (hybrid keyword + vector search on Typesense 0.24.1, or keyword
only). :mod:`.embedding` is the embedding model both sides load.
"""

from .collection import (
    COLLECTION_FIELDS,
    DEFAULT_SEARCH,
    EMBEDDING_FIELD,
    SEARCH_MODES,
    SERVICE_UNAVAILABLE,
    PolicySearchError,
    SearchMode,
    make_client,
)
from .embedding import E5, EmbeddingUnavailable, model_id
from .indexing import (
    build_documents,
    document_vectors,
    drop_collection,
    index_sources,
    new_collection_name,
    snippet_texts,
)
from .policy_search import (
    DEFAULT_MAX_RESULTS,
    MAX_MAX_RESULTS,
    PolicySearch,
    PolicySearchInput,
    TypesenseSettings,
    client_from_env,
    collection_mode,
    effective_max_results,
    keyword_query,
    merge_results,
    search_policy,
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
