"""Filling a policy collection, on the host while a sandbox is prepared (the tool
server never runs this): the documents, their vectors and the collection.

What the benchmark specifies (zendesk-and-engine.md §3.8, retail.md §3.10): at
init every snippet of every source becomes one Typesense document, no chunking.
tbx brings the vectors itself (Typesense 0.24.1 has no built-in embedder, see
:mod:`.policy_search`): each distinct text is embedded once per model on the
host (:class:`.embedding.E5`, all cores), kept in an on-disk cache, and imported
with the documents into the ``embedding`` field; a collection without that
field serves keyword search only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .collection import (
    COLLECTION_FIELDS,
    CONTENT,
    EMBEDDING,
    EMBEDDING_FIELD,
    INDEX_FAILED_PREFIX,
    SOURCE,
    TEXT,
    PolicySearchError,
    TypesenseLike,
    detail,
    handle,
)
from .embedding import DIM, E5, Vector, check_cpu, model_id

# --------------------------------------------------------------------------- documents


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
                    SOURCE: name,
                    "chunk_index": 0,
                    "num_tokens": 0,
                    CONTENT: snippet,
                    TEXT: snippet,
                }
            )
    return docs


def snippet_texts(sources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts :func:`build_documents` indexes, in the same order (what to embed)."""
    return [doc[TEXT] for doc in build_documents(sources)]


# --------------------------------------------------------------------------- the collection


def index_sources(
    client: TypesenseLike,
    collection: str,
    sources: list[dict[str, Any]],
    embeddings: Sequence[Sequence[float]] | None = None,
) -> int:
    """Create ``collection`` and bulk-import one document per snippet; return the count.

    ``embeddings`` (one vector per snippet, in :func:`snippet_texts` order, e.g.
    from :func:`document_vectors`) makes it a hybrid collection with an
    ``embedding`` field; without them it serves keyword search only. Empty
    ``sources`` creates nothing and returns 0 (the tool then reports that the
    service is not available, as the reference does). The documents go in with
    a single ``/documents/import`` request.
    """
    docs = build_documents(sources)
    if not sources:
        return 0
    fields = list(COLLECTION_FIELDS)
    if embeddings is not None:
        if len(embeddings) != len(docs):
            raise ValueError(f"{len(embeddings)} embeddings for {len(docs)} snippets")
        for doc, vec in zip(docs, embeddings, strict=True):
            if len(vec) != DIM:
                raise ValueError(f"an embedding has {len(vec)} dimensions, expected {DIM}")
            doc[EMBEDDING] = [float(x) for x in vec]
        fields.append(EMBEDDING_FIELD)
    try:
        client.collections.create({"name": collection, "fields": fields})
        if not docs:
            return 0
        results = handle(client, collection).documents.import_(docs, {"action": "create"})
    except Exception as exc:
        raise PolicySearchError(INDEX_FAILED_PREFIX + detail(exc)) from exc
    failed = [r for r in results if not (isinstance(r, Mapping) and r.get("success") is True)]
    if failed or len(results) != len(docs):
        first = failed[0] if failed else f"{len(results)} results for {len(docs)} documents"
        raise PolicySearchError(
            f"{INDEX_FAILED_PREFIX}{len(failed)} of {len(docs)} documents failed: {first}"
        )
    return len(docs)


def drop_collection(client: TypesenseLike, collection: str) -> None:
    """Delete the collection (teardown); a missing collection is not an error."""
    from typesense.exceptions import ObjectNotFound

    with contextlib.suppress(ObjectNotFound):
        handle(client, collection).delete()


# --------------------------------------------------------------------------- document vectors

_HOST_MODEL = E5()  # all cores of the host; loaded only if a vector is missing from the cache
_MEMO: dict[str, Vector] = {}
_MEMO_LOCK = threading.Lock()


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    root = env.get("TBX_CACHE") or str(Path.home() / ".cache" / "tbx")
    return Path(root) / "embeddings"


def cache_key(text: str, model: str) -> str:
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


def document_vectors(
    texts: Sequence[str], *, cache: Path | None = None, embed: Callable[[str], Vector] | None = None
) -> list[Vector]:
    """One vector per text, each computed once per distinct text and model, then
    read from the on-disk cache (``$TBX_CACHE/embeddings``, default ~/.cache/tbx).

    Runs on the host while a sandbox is prepared; concurrent preparations wait
    for one computation instead of repeating it.
    """
    model = model_id()
    # Even when every vector is cached: the attempt's server will load this model on the
    # same CPU, and a machine that cannot run it is a setup error, not an agent's failure.
    check_cpu()
    folder = cache or cache_dir()
    embed = embed or _HOST_MODEL.passage
    out: list[Vector] = []
    with _MEMO_LOCK:  # one embedding at a time in this process: the engine is not re-entrant anyway
        for text in texts:
            key = cache_key(text, model)
            vec = _MEMO.get(key)
            if vec is None:
                vec = _read(folder / f"{key}.json")
            if vec is None:
                vec = embed(text)
                _write(folder / f"{key}.json", vec)
            _MEMO[key] = vec
            out.append(vec)
    return out


def _read(path: Path) -> Vector | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(data, list) and len(data) == DIM and all(isinstance(x, float) for x in data)):
        return None  # a torn or foreign file: recompute
    return data


def _write(path: Path, vec: Vector) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(vec))
    tmp.replace(path)
