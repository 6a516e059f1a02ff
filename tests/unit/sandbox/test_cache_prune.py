"""What `tbx gc` prunes from the host cache (a temp TBX_CACHE): golden sets of
servers-image builds that are gone, in-use records of exited processes, and
runtime-volume lock files of removed images; what a live process or an existing
image still needs stays."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run.golden import GoldenStore, default_cache_dir, image_dir, prune_golden
from judge import GoldenState, State, state_hash
from sandbox import prune_in_use_records, prune_locks
from sandbox.images import mark_in_use, tags_in_use
from sandbox.runtime_volumes import volume_name

KEPT, GONE = "sha256:" + "a" * 64, "sha256:" + "b" * 64


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TBX_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TBX_GOLDEN_CACHE", raising=False)
    return tmp_path / "cache"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_golden_sets_of_removed_builds_go_and_the_current_ones_stay(cache: Path) -> None:
    assert default_cache_dir() == cache / "golden"  # TBX_CACHE holds the golden states too
    for image in (KEPT, GONE):
        f = cache / "golden" / image_dir(image) / "ab" / "abcd.json.gz"
        f.parent.mkdir(parents=True)
        f.write_bytes(b"x")
    legacy = cache / "golden" / "ab" / "abcd.json.gz"  # before per-build directories: not attributable
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"x")

    assert prune_golden({KEPT}) == [image_dir(GONE)]
    assert (cache / "golden" / image_dir(KEPT) / "ab" / "abcd.json.gz").is_file()
    assert not (cache / "golden" / image_dir(GONE)).exists()
    assert legacy.is_file()
    assert prune_golden({KEPT}) == []
    assert prune_golden(set(), cache / "nowhere") == []


def test_a_golden_state_cached_before_per_build_directories_is_still_read(tmp_path: Path) -> None:
    state: State = {"t": []}
    h = state_hash(state)
    golden = GoldenState(
        task_id="t", key="cd" * 32, initial_state=state, final_state=state, initial_hash=h, golden_hash=h
    )
    store = GoldenStore(None, tmp_path, image_id=KEPT)  # type: ignore[arg-type]  # path/load need no benchmark
    store.save(golden)
    assert store.path(golden.key).parent.parent.name == image_dir(KEPT)
    old = tmp_path / golden.key[:2] / f"{golden.key}.json.gz"
    old.parent.mkdir(parents=True, exist_ok=True)
    store.path(golden.key).rename(old)
    assert not store.path(golden.key).exists()
    loaded = store.load(golden.key)
    assert loaded is not None and loaded.key == golden.key


def test_in_use_records_of_exited_processes_go(cache: Path) -> None:
    mark_in_use(["tbx/servers:live"])
    dead = cache / "images-in-use" / f"{_dead_pid()}.json"
    dead.write_text(json.dumps(["tbx/servers:old"]))
    (cache / "images-in-use" / "junk.json").write_text("[]")

    assert sorted(prune_in_use_records()) == sorted([dead.name, "junk.json"])
    assert sorted(p.name for p in (cache / "images-in-use").iterdir()) == [f"{os.getpid()}.json"]
    assert tags_in_use() == {"tbx/servers:live"}


def test_lock_files_of_removed_images_go_unless_held(cache: Path) -> None:
    locks = cache / "runtime-volumes"
    locks.mkdir(parents=True)
    kept = locks / f"{volume_name(KEPT, '/usr')}.lock"
    gone = locks / f"{volume_name(GONE, '/usr')}.lock"
    held = locks / f"{volume_name('sha256:' + 'c' * 64, '/opt/venv')}.lock"
    for f in (kept, gone, held):
        f.write_text("")
    with open(held) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # a copier at work: left alone
        assert prune_locks({KEPT}) == [gone.name]
    assert kept.is_file() and held.is_file() and not gone.exists()
    assert prune_locks({KEPT}) == [held.name]
