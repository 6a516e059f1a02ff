"""The domain registry: every domain is found from the `servers.domains` packages, its
names come from its `Domain` object, and a broken domain fails loudly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servers import domains, registry
from servers.registry import UnknownDomainError, domain_names, load_domain, server_to_domain


@pytest.fixture
def clear_caches() -> Iterator[None]:
    registry.domain_names.cache_clear()
    registry.server_to_domain.cache_clear()
    yield
    registry.domain_names.cache_clear()
    registry.server_to_domain.cache_clear()


def test_domains_and_server_names_come_from_the_domain_objects() -> None:
    assert domain_names() == ("auto_insurance", "consulting", "neobank", "retail", "travel")
    mapping = server_to_domain()
    assert mapping["sandbox_external_retail"] == "retail"
    assert mapping["external_booking_v1"] == "travel"
    for server, name in mapping.items():
        domain = load_domain(server)
        assert (domain.name, domain.server, domain.module) == (name, server, f"mcp_{server}")
        assert load_domain(name) is domain


def test_unknown_domain_names_the_known_ones() -> None:
    with pytest.raises(UnknownDomainError, match="unknown domain 'nope'; known: auto_insurance, consulting"):
        load_domain("nope")


def test_a_domain_with_a_bad_import_fails_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clear_caches: None
) -> None:
    pkg = tmp_path / "brokendomain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "domain.py").write_text("import servers.no_such_module  # a typo in an import\n")
    monkeypatch.setattr(domains, "__path__", [*domains.__path__, str(tmp_path)])
    assert "brokendomain" in domain_names()
    with pytest.raises(ModuleNotFoundError, match=r"servers\.no_such_module"):
        load_domain("brokendomain")
    # Looking a domain up by its server name reads every domain: the broken one is not skipped.
    with pytest.raises(ModuleNotFoundError, match=r"servers\.no_such_module"):
        load_domain("sandbox_external_retail")
