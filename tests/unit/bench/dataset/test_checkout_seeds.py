"""A thinkingbox-data checkout is a dataset: each domain's seed rows derived from its
``initial_data/*.json`` files are the export's ``servers/<module>/seed.json``, row for
row, and every task's initial state hashes as the reference traced it; whatever is
wrong with the data is a problem found at load, naming its file or server.

The real data is read where it lies (never copied into the repository): the checkout
and the export beside this repository, as shared with it.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.cli.tasks import validate_command
from bench.dataset import load_benchmark
from bench.dataset.checkout_seeds import checkout_seed, toolslib_dir
from bench.prepare import initial_state
from judge import canonical_state, state_hash
from servers.registry import domain_names, load_domain

REPO = Path(__file__).resolve().parents[4]
CHECKOUT = REPO.parent / "shared/benchmarks/thinkingbox-data"
EXPORT = REPO.parent / "shared/benchmarks/thinkingbox-bench-v1"
AIRLINE_RELEASE = "testlist_2604_airline_tau_bench"


@pytest.fixture(scope="module", autouse=True)
def _data_present() -> None:
    for path in (CHECKOUT / "servers", EXPORT / "servers"):
        if not path.is_dir():
            pytest.fail(f"ThinkingBox-Bench data not found at {path}")


@pytest.fixture(scope="module")
def checkout() -> Any:
    return load_benchmark(CHECKOUT)


@pytest.mark.parametrize("name", domain_names())
def test_derived_seed_is_the_exports_seed_row_for_row(name: str) -> None:
    domain = load_domain(name)
    exported = json.loads((EXPORT / "servers" / domain.module / "seed.json").read_text())
    derived = checkout_seed(CHECKOUT, domain)
    assert list(derived) == list(exported)  # the same tables, in the same order
    for table, rows in exported.items():
        assert derived[table] == rows, table


def test_every_traced_task_starts_from_the_traced_initial_state(checkout: Any) -> None:
    traces = {}
    for path in sorted((EXPORT / "traces").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            trace = json.loads(line)
            traces[trace["task_id"]] = trace["initial_state_hash"]
    assert len(traces) == 405
    matched = 0
    for task in checkout.tasks:
        if task.id not in traces:
            continue
        state = canonical_state(load_domain(task.domain).tables, initial_state(checkout, task))
        assert state_hash(state) == traces[task.id], task.id
        matched += 1
    assert matched == 405


def test_seeds_are_read_at_load_and_attempts_never_touch_the_files(tmp_path: Path) -> None:
    # A DatasetError during an attempt would be retried as a system error: everything a
    # task's seeding needs is read and checked when the benchmark loads.
    copy = tmp_path / "data"
    shutil.copytree(CHECKOUT, copy)
    bench = load_benchmark(copy)
    shutil.rmtree(copy / "servers")
    for domain in {t.domain for t in bench.tasks}:
        task = next(t for t in bench.tasks if t.domain == domain)
        assert initial_state(bench, task)


def _copy_checkout(tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(CHECKOUT, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    copy.chmod(0o755)
    return copy


def _errors(root: Path, release: str | None = None) -> list[str]:
    return [str(p) for p in load_benchmark(root, release=release, strict=False).errors]


def test_a_release_on_a_checkout_server_loads_its_tasks() -> None:
    # The airline release runs on the checkout's own server (issue 44): its tasks load,
    # each on that server, none on a native domain.
    assert _errors(CHECKOUT, AIRLINE_RELEASE) == []
    bench = load_benchmark(CHECKOUT, release=AIRLINE_RELEASE)
    assert len(bench.tasks) == 21
    assert all(bench.on_checkout_servers(t) for t in bench.tasks)
    assert {s for t in bench.tasks for s in bench.servers_of(t)} == {"airline_tau_bench"}


def test_missing_and_malformed_seed_files_are_named(tmp_path: Path) -> None:
    root = _copy_checkout(tmp_path)
    base = toolslib_dir(root, "sandbox_external_retail")
    retail = load_domain("retail")
    orders = base / retail.seed_file("external_retail_toolset_oms_models_orders")
    orders.unlink()
    products = base / retail.seed_file("external_retail_toolset_shopify_pim_models_products")
    products.write_text("[{not json")
    travel = load_domain("travel")
    hotels = base / travel.seed_file("hotel_partner_api_hotels")
    rows = json.loads(hotels.read_text())
    rows[1]["partner_tier"] = {"not": "a tier"}
    rows[2] = "not a row"
    hotels.write_text(json.dumps(rows))

    bench = load_benchmark(root, strict=False)
    errors = [str(p) for p in bench.errors]
    rel = base.relative_to(root).as_posix()
    assert errors[0] == (
        f"{rel}/external_retail_toolset/oms/initial_data/orders.json: "
        "missing seed file of table 'external_retail_toolset_oms_models_orders' (sandbox_external_retail)"
    )
    assert errors[1].startswith(
        f"{rel}/external_retail_toolset/shopify_pim/initial_data/products.json: cannot read JSON"
    )
    assert any(
        e.startswith(f"{rel}/external_booking/hotel_partner_api/initial_data/hotels.json: [1]: invalid row")
        for e in errors
    )
    assert (
        f"{rel}/external_booking/hotel_partner_api/initial_data/hotels.json: [2]: a row must be a mapping, got string"
        in errors
    )
    # the other domains' tasks stay usable; the broken ones' are out
    assert {t.domain for t in bench.tasks} == {"auto_insurance", "consulting", "neobank"}

    out = io.StringIO()
    assert validate_command(root, out=out) == 1
    assert out.getvalue().splitlines()[: len(errors)] == errors


def test_servers_yaml_names_the_package(tmp_path: Path) -> None:
    root = _copy_checkout(tmp_path)
    package = root / "servers" / "tb_business_ops_servers_202606"
    package.rename(root / "servers" / "renamed_pkg")
    errors = _errors(root)
    assert errors and all("servers.yaml starts server" in e for e in errors)
    # without servers.yaml, the one package with a toolslib folder is the source
    (root / "servers" / "servers.yaml").unlink()
    assert _errors(root) == []


def test_export_seed_rows_are_checked_against_the_tables(tmp_path: Path) -> None:
    root = tmp_path / "export"
    shutil.copytree(EXPORT, root, ignore=shutil.ignore_patterns("traces"))
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    seed_file = root / "servers/mcp_sandbox_consulting/seed.json"
    seed = json.loads(seed_file.read_text())
    seed["workday_employees"][0]["level"] = {"not": "a level"}
    seed["no_such_table"] = []
    seed_file.write_text(json.dumps(seed))
    errors = _errors(root)
    assert errors[0].startswith("servers/mcp_sandbox_consulting/seed.json: no_such_table: unknown table")
    assert errors[1].startswith(
        "servers/mcp_sandbox_consulting/seed.json: workday_employees[0]: invalid row: level"
    )
    seed_file.write_text(json.dumps({"workday_employees": "a string"}))
    assert _errors(root) == [
        "servers/mcp_sandbox_consulting/seed.json: workday_employees: must be a list of rows (mappings)"
    ]
