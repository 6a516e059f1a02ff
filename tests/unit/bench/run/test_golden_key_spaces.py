"""The Session API's golden states are a second key space of the one GoldenStore:
its own keys (never a task's), the store's directory and per-build layout (so
`tbx gc`'s prune_golden covers them), and its reader for files of the older layout."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.run.golden import GoldenStore, golden_key, image_dir, prune_golden, session_golden_key
from bench.session_api.golden_cache import GoldenCache
from bench.session_api.server_config import SessionServer
from judge import GoldenState, State, state_hash

IMAGE, OTHER = "sha256:" + "a" * 64, "sha256:" + "b" * 64
CALLS: list[tuple[str, dict[str, Any]]] = [("get_order", {"order_id": "ORD-1"})]
ROWS: dict[str, Any] = {"orders": [{"id": "ORD-1"}]}


def _entry(**update: Any) -> SessionServer:
    fields: dict[str, Any] = {
        "server": "sandbox_external_retail",
        "domain": "retail",
        "rows": ROWS,
        "golden_calls": CALLS,
    }
    return SessionServer(**{**fields, **update})


def _golden(key: str) -> GoldenState:
    state: State = {"orders": []}
    h = state_hash(state)
    return GoldenState(
        task_id="sandbox_external_retail",
        key=key,
        initial_state=state,
        final_state=state,
        initial_hash=h,
        golden_hash=h,
    )


def _store(root: Path, image: str = IMAGE) -> GoldenStore:
    return GoldenStore(None, root, image_id=image)  # type: ignore[arg-type]  # keyed paths need no benchmark


class _NoReplays:
    """A provider whose checkout fails: a test that reaches it expected a cached state."""

    async def checkout(self, request: Any) -> Any:
        raise AssertionError("replayed a golden state that was cached")


def test_session_keys_depend_on_content_and_build_only() -> None:
    key = session_golden_key("retail", CALLS, ROWS, IMAGE)
    assert key == session_golden_key("retail", list(CALLS), dict(ROWS), IMAGE)
    assert key != session_golden_key("retail", CALLS, ROWS, OTHER)
    assert key != session_golden_key("retail", [], ROWS, IMAGE)
    assert key != session_golden_key("retail", CALLS, {"orders": []}, IMAGE)
    assert key != session_golden_key("travel", CALLS, ROWS, IMAGE)
    # The server name and the session are not part of it: 8 sessions of one entry share it.
    cache = GoldenCache(_store(Path("/nonexistent")), _NoReplays())  # type: ignore[arg-type]
    assert cache.key(_entry()) == key == cache.key(_entry(server="other_name", rubrics=["r"]))


def test_session_and_task_key_spaces_never_meet() -> None:
    task = SimpleNamespace(id="t1", domain="retail", server="sandbox_external_retail")
    task_key = golden_key(task, CALLS, ROWS, IMAGE)  # type: ignore[arg-type]
    assert task_key != session_golden_key("retail", CALLS, ROWS, IMAGE)


def test_a_session_golden_state_lives_in_the_store_and_gc_prunes_its_build(tmp_path: Path) -> None:
    store = _store(tmp_path)
    cache = GoldenCache(store, _NoReplays())  # type: ignore[arg-type]
    key = cache.key(_entry())
    store.save(_golden(key))
    assert store.path(key) == tmp_path / image_dir(IMAGE) / key[:2] / f"{key}.json.gz"

    golden = asyncio.run(cache.get(_entry()))
    assert golden.key == key and cache.replays == 0

    assert prune_golden({OTHER}, tmp_path) == [image_dir(IMAGE)]
    assert not store.path(key).exists()


def test_a_session_golden_state_of_the_older_flat_layout_is_still_read(tmp_path: Path) -> None:
    store = _store(tmp_path)
    cache = GoldenCache(store, _NoReplays())  # type: ignore[arg-type]
    key = cache.key(_entry())
    store.save(_golden(key))
    flat = tmp_path / key[:2] / f"{key}.json.gz"  # where the Session API wrote them before
    flat.parent.mkdir(parents=True)
    store.path(key).rename(flat)

    assert asyncio.run(cache.get(_entry())).key == key and cache.replays == 0
