"""The generated table declarations are what scripts/gen_table_specs.py writes
from the benchmark export (after ruff's formatting): the Zendesk tables once,
every domain's own tables after its variant's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from servers.registry import domain_names, load_domain
from servers.toolsets.zendesk import VARIANTS, zendesk_tables

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_table_specs", REPO / "scripts" / "gen_table_specs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def formatted(source: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "tables.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout


@pytest.mark.parametrize("what", ["zendesk", *domain_names()])
def test_generated_file_is_current(gen: ModuleType, dataset: Path, what: str) -> None:
    source = gen.generate_zendesk(dataset) if what == "zendesk" else gen.generate(dataset, what)
    assert formatted(source) == gen.tables_file(what).read_text()


def test_zendesk_tables_are_shared_but_for_the_ticket_fields() -> None:
    variants = {v: {t.name: t for t in zendesk_tables(v)} for v in VARIANTS}
    for name in ("zendesk_articles", "zendesk_users", "zendesk_comments", "zendesk_organizations"):
        assert len({variants[v][name] for v in VARIANTS}) == 1
    tickets = {v: variants[v]["zendesk_tickets"].field_names for v in VARIANTS}
    assert tickets["generic"][-1] == "due_at"
    assert all(t[: len(tickets["generic"])] == tickets["generic"] for t in tickets.values())
    with_log = {v for v in VARIANTS if "zendesk_ticket_status_violations" in variants[v]}
    assert with_log == {"auto_insurance", "consulting", "neobank"}
    for domain in domain_names():
        names = [t.name for t in load_domain(domain).tables]
        zendesk = [n for n in names if n.startswith("zendesk_")]
        assert names[: len(zendesk)] == zendesk  # registered first, as in the reference
