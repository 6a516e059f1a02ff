"""Image tags: content hashes, and the record that keeps a running tag from being pruned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import images


def test_content_hash_follows_the_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images, "REPO", tmp_path)
    monkeypatch.setattr(images, "IMAGES_DIR", tmp_path / "images")
    dockerfile = tmp_path / "images" / "probe" / "Dockerfile"
    dockerfile.parent.mkdir(parents=True)
    dockerfile.write_text("FROM debian:bookworm-slim\n")
    (tmp_path / "extra.py").write_text("x = 1\n")
    spec = images.ImageSpec("probe", extra_inputs=("*.py",))
    before = images.content_hash(spec)
    assert images.content_hash(spec) == before and len(before) == 16
    dockerfile.write_text("FROM debian:bookworm-slim\nRUN true\n")
    after_dockerfile = images.content_hash(spec)
    assert after_dockerfile != before
    (tmp_path / "extra.py").write_text("x = 2\n")
    assert images.content_hash(spec) != after_dockerfile


def test_tags_in_use_are_those_of_live_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBX_CACHE", str(tmp_path))
    images.mark_in_use(["tbx/servers:aaaa"])
    images.mark_in_use(["tbx/postgres:bbbb"])  # a second resolve in the same process adds to it
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / "images-in-use" / f"{int(dead.stdout)}.json"
    stale.write_text(json.dumps(["tbx/servers:cccc"]))
    assert images.tags_in_use() == {"tbx/servers:aaaa", "tbx/postgres:bbbb"}
    assert not stale.exists(), "the record of an exited process is dropped"
