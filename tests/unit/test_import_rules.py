"""The dependency rules of docs/architecture.md, read from the source: every
`import` / `from ... import` statement (also inside functions and
TYPE_CHECKING blocks) of each part is parsed with `ast`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = ("bench", "sandbox", "servers", "judge", "lazy_exports")


def imported_parts(package: str) -> dict[str, set[str]]:
    """tbx part -> the files of `package` that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in PARTS and top != package:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_the_parser_sees_imports_inside_functions() -> None:
    # bench.cli imports its commands' dependencies lazily, inside functions.
    assert "bench/cli/gc.py" in imported_parts("bench")["sandbox"]


@pytest.mark.parametrize("package", ["sandbox", "judge"])
def test_sandbox_and_judge_import_nothing_from_bench(package: str) -> None:
    assert imported_parts(package).get("bench", set()) == set()


def test_judge_does_not_import_the_container_layer() -> None:
    assert imported_parts("judge").get("sandbox", set()) == set()


def test_servers_import_no_other_part_of_tbx() -> None:
    assert imported_parts("servers") == {}


def test_the_lazy_export_helper_imports_no_part_of_tbx() -> None:
    # sandbox and judge share it, so it must sit below both.
    assert imported_parts("lazy_exports") == {}


def test_sandbox_imports_nothing_from_servers() -> None:
    assert imported_parts("sandbox").get("servers", set()) == set()


@pytest.mark.parametrize("package", ["sandbox", "judge"])
def test_public_names_are_exported_and_resolve(package: str) -> None:
    module = importlib.import_module(package)
    exports = module._EXPORTS
    assert sorted(module.__all__) == sorted(exports)
    for name, where in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(where), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018 - the lookup is the test


def type_checking_imports(package: str) -> dict[str, str]:
    """name -> module of the `from M import name` statements in the package's
    `if TYPE_CHECKING:` block (what the type checker sees)."""
    tree = ast.parse((REPO / package / "__init__.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, ast.dump(statement)
                for alias in statement.names:
                    assert alias.asname is None, f"{alias.name} is renamed"
                    found[alias.name] = statement.module
    return found


@pytest.mark.parametrize("package", ["sandbox", "judge"])
def test_the_type_checkers_names_are_the_exported_names(package: str) -> None:
    # The TYPE_CHECKING block and _EXPORTS are the same list written twice
    # (one for mypy, one for the lazy lookup); this keeps them from drifting.
    assert type_checking_imports(package) == importlib.import_module(package)._EXPORTS
