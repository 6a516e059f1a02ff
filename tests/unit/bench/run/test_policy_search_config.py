"""Which policy search a run uses: the CLI flag, the run options, the task's
preparation, what it indexes, and the manifest entry that records it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import build_parser
from bench.prepare import TaskPreparation
from bench.run import output
from bench.run.coordinator import RunOptions
from sandbox import TypesenseEndpoint
from servers.toolsets import knowledge

SOURCES = [{"name": "A.md", "snippets": ["alpha"]}, {"name": "B.md", "snippets": ["bravo"]}]


def test_cli_flag_defaults_to_hybrid_and_accepts_keyword() -> None:
    parser = build_parser()
    assert parser.parse_args(["run", "--out", "x"]).policy_search == "hybrid"
    assert parser.parse_args(["run", "--out", "x", "--policy-search", "keyword"]).policy_search == "keyword"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--out", "x", "--policy-search", "bm25"])


def test_options_and_preparation_validate_the_mode() -> None:
    assert RunOptions(out=Path("x")).policy_search == "hybrid"
    assert TaskPreparation().policy_search == "hybrid"
    with pytest.raises(ValueError):
        TaskPreparation(policy_search="vector")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_sandbox_indexes_vectors_only_for_hybrid(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    indexed: list[tuple[str, Any]] = []
    embedded: list[list[str]] = []

    def fake_vectors(texts: list[str]) -> list[list[float]]:
        embedded.append(texts)
        return [[0.0] * 384 for _ in texts]

    monkeypatch.setattr(knowledge, "make_client", lambda url, key, **kw: object())
    monkeypatch.setattr(knowledge, "document_vectors", fake_vectors)
    monkeypatch.setattr(
        knowledge, "index_sources", lambda c, coll, s, embeddings=None: indexed.append((coll, embeddings))
    )
    prep = TaskPreparation(sources=SOURCES, policy_search=mode)  # type: ignore[arg-type]
    assert prep.index(TypesenseEndpoint(url="http://10.0.0.1:8108", api_key="k", collection="policies"))
    [(collection, vectors)] = indexed
    assert collection == "policies"
    if mode == "hybrid":
        assert embedded == [["alpha", "bravo"]] and vectors is not None and len(vectors) == 2
    else:
        assert embedded == [] and vectors is None


def test_manifest_records_the_policy_search(tmp_path: Path) -> None:
    bench = type("B", (), {"root": tmp_path, "release": None})()
    for mode in ("keyword", "hybrid"):
        manifest = output.write_manifest(
            tmp_path,
            bench,  # type: ignore[arg-type]
            agent="oracle",
            repeats=1,
            run_name=None,
            images={"servers": "tbx/servers:x"},
            digests={"servers": "sha256:x"},
            config=None,
            data_hash="h",
            policy_search=mode,
        )
        assert manifest["policy_search"] == mode
        assert json.loads((tmp_path / "manifest.json").read_text())["policy_search"] == mode
        # The two searches never mix in one output directory: a change of mode is a change of bundle.
        (tmp_path / "manifest.json").unlink()
    a = output.bundle_hash({**dict.fromkeys(output.BUNDLE_KEYS, "x"), "policy_search": "hybrid"})
    b = output.bundle_hash({**dict.fromkeys(output.BUNDLE_KEYS, "x"), "policy_search": "keyword"})
    assert a != b
