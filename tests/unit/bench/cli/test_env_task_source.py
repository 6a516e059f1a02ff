"""`tbx env serve --tasks`: a file is a task list of the release layout, loaded as the
benchmark's release (its order, its ids checked); anything else is comma-separated ids."""

from __future__ import annotations

from pathlib import Path

from pg_support import DEMO_PACK

from bench.cli.env import task_source
from bench.cli.run import select_tasks
from bench.dataset import load_benchmark

PACK = DEMO_PACK


def test_a_file_is_loaded_as_the_release_in_its_order(tmp_path: Path) -> None:
    everything = load_benchmark(PACK)
    chosen = [t.id for t in everything.tasks][:2][::-1]
    listing = tmp_path / "train.yaml"
    listing.write_text("".join(f"- {i}\n" for i in chosen))
    release, ids = task_source(str(listing), None)
    assert release == listing.resolve() and ids is None
    bench = load_benchmark(PACK, release=release, strict=False)
    assert [t.id for t in select_tasks(bench, ids, None)] == chosen


def test_ids_stay_ids() -> None:
    assert task_source("a.py:t1,a.py:t2", "rel") == ("rel", "a.py:t1,a.py:t2")
    assert task_source(None, None) == (None, None)


def test_a_long_id_list_is_ids_not_a_path_too_long_to_look_up() -> None:
    ids = ",".join(f"sandbox_external_retail_group1.py:test_case_ST{i:03d}_001" for i in range(8))
    assert len(ids) > 255  # longer than a file name may be: the lookup itself fails
    assert task_source(ids, None) == (None, ids)
