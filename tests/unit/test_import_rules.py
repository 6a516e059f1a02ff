"""The dependency rules of docs/architecture.md, read from the source: every
`import` / `from ... import` statement (also inside functions and
TYPE_CHECKING blocks) of each part is parsed with `ast`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = ("bench", "sandbox", "servers", "judge", "lazy_exports", "tbx")


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


@pytest.mark.parametrize("package", ["bench", "sandbox", "servers", "judge", "lazy_exports"])
def test_no_part_of_tbx_imports_the_inspect_extension(package: str) -> None:
    # tbx/ is an optional extra on top (pip install 'tbx[inspect]'): nothing below may need it.
    assert imported_parts(package).get("tbx", set()) == set()


def test_the_inspect_extension_uses_tbxs_api_not_its_servers() -> None:
    # bench's lifecycle, grading and metrics, sandbox's provider and proxy, judge's rubric
    # judge; never the tool servers' code, which runs in containers.
    assert set(imported_parts("tbx")) <= {"bench", "sandbox", "judge"}
    assert "bench" in imported_parts("tbx")


def test_sandbox_imports_nothing_from_servers() -> None:
    assert imported_parts("sandbox").get("servers", set()) == set()


# bench's own order, lowest first: a module may import bench's modules of lower
# layers and its own sub-package, nothing of its layer or above (so no loop).
BENCH_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"threadsafe_ast", "defaults", "web_guard", "harness_names", "terminal_text", "source_commit"}),
    frozenset({"dataset", "llm", "version"}),
    frozenset({"prepare"}),
    frozenset({"rollout", "replay"}),
    frozenset({"evaluator"}),
    frozenset({"run"}),
    frozenset({"env", "report", "session_api"}),
    frozenset({"view"}),
    frozenset({"cli"}),
)


def bench_unit(module: str) -> str | None:
    """`bench.run.attempt` -> "run": the sub-package or top-level module of bench it is in."""
    parts = module.split(".")
    return parts[1] if parts[0] == "bench" and len(parts) > 1 else None


def bench_imports(root: Path = REPO / "bench") -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, file) for every import between two units of
    bench; relative imports are resolved against the file's package."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        package = list(rel.parts if rel.name == "__init__" else rel.parts[:-1])
        if rel.name == "__init__":
            package = package[:-1]
        source = bench_unit(".".join(rel.parts))
        if source is None or source == "__init__":
            continue  # bench/__init__.py: the package itself
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                base = package[: len(package) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
            else:
                continue
            for name in names:
                target = bench_unit(name)
                if target is not None and target != source:
                    found.append((source, target, str(path.relative_to(root.parent))))
    return found


def layer_of(unit: str) -> int:
    return next(i for i, layer in enumerate(BENCH_LAYERS) if unit in layer)


def test_every_part_of_bench_has_a_layer() -> None:
    units = {p.stem if p.is_file() else p.name for p in (REPO / "bench").iterdir()}
    units = {u for u in units if not u.startswith(("_", ".")) and u != "packs"}
    assert units == set().union(*BENCH_LAYERS)


def test_bench_imports_only_downwards() -> None:
    upward = [
        f"{file}: {source} imports {target}"
        for source, target, file in bench_imports()
        if layer_of(target) >= layer_of(source)
    ]
    assert upward == []


def test_the_layer_check_sees_a_loop(tmp_path: Path) -> None:
    # A tree where replay imports run (the loop bench/prepare.py broke), written out
    # as files, relative and absolute: the check must name both imports.
    (tmp_path / "bench" / "replay").mkdir(parents=True)
    (tmp_path / "bench" / "run").mkdir()
    (tmp_path / "bench" / "replay" / "sandboxed.py").write_text(
        "def f():\n    from bench.run.attempt import x\n"
    )
    (tmp_path / "bench" / "replay" / "golden.py").write_text("from ..run import golden\n")
    (tmp_path / "bench" / "run" / "attempt.py").write_text("from bench.replay.sandboxed import f\n")
    found = bench_imports(tmp_path / "bench")
    upward = sorted((s, t) for s, t, _ in found if layer_of(t) >= layer_of(s))
    assert upward == [("replay", "run"), ("replay", "run")]
    assert ("run", "replay") in {(s, t) for s, t, _ in found}


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


def _from_imports(package: str, of: str) -> list[tuple[str, str, list[str]]]:
    """(file, module, names) of every `from <of>.<sub> import names` in `package`."""
    out = []
    for path in sorted((REPO / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith(of + ".")
            ):
                out.append((str(path.relative_to(REPO)), node.module or "", [a.name for a in node.names]))
    return out


def packages_of(package: str) -> set[str]:
    """`sandbox`, `sandbox.proxy`: the package and its sub-packages (the folders
    with an `__init__.py`), the only addresses other parts may import from."""
    return {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / package).rglob("__init__.py")}


def module_file_imports(root: Path, package: str) -> list[str]:
    """Every import under `root` of one of `package`'s module files: `import
    package.mod`, `from package.mod import x`, `from package.sub import mod`
    (also inside functions and TYPE_CHECKING blocks)."""
    packages = packages_of(package)
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith(package + ".")]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != package:
                    continue
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                names = [n for n in names if n == node.module or n in packages or _is_module(n)]
            else:
                continue
            found += [
                f"{path.relative_to(root.parent)}:{node.lineno}: {n}" for n in names if n not in packages
            ]
    return found


def _is_module(dotted: str) -> bool:
    return (REPO / (dotted.replace(".", "/") + ".py")).is_file()


# the parts that import sandbox / judge, not the package itself
OUTSIDE = {
    "sandbox": ("bench", "judge", "servers", "scripts"),
    "judge": ("bench", "sandbox", "servers", "scripts"),
}


@pytest.mark.parametrize("package", ["sandbox", "judge"])
def test_other_parts_import_only_the_package_surface(package: str) -> None:
    # What other parts use is on the package's surface (`__init__`'s `_EXPORTS`,
    # or a sub-package's `__init__`); the module files behind it are free to move.
    offenders = [
        hit
        for part in OUTSIDE[package]
        if (REPO / part).is_dir()
        for hit in module_file_imports(REPO / part, package)
    ]
    assert offenders == []


def test_the_surface_check_sees_module_files(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text(
        "import sandbox.provider\n"
        "from sandbox.proxy.relay import sendable\n"
        "from sandbox.proxy import relay\n"
        "def f():\n    from sandbox.admission import admit\n"
        "from sandbox import DockerProvider\n"
        "from sandbox.proxy import ProxyServer\n"
    )
    hits = [h.split(": ")[1] for h in module_file_imports(tmp_path, "sandbox")]
    assert sorted(hits) == [
        "sandbox.admission",
        "sandbox.provider",
        "sandbox.proxy.relay",
        "sandbox.proxy.relay",
    ]


@pytest.mark.parametrize("package", ["sandbox", "judge"])
def test_tests_and_benchmarks_take_public_names_from_the_package(package: str) -> None:
    # Tests and benchmarks may reach a module file for what it alone holds (a
    # probe, a monkeypatch target), never for a public name.
    top = importlib.import_module(package)

    def public(module: str, name: str) -> bool:
        value = getattr(importlib.import_module(module), name, None)
        return name in top.__all__ and value is getattr(top, name)

    offenders = [
        f"{path}: from {module} import {name}"
        for root in ("tests", "benchmarks")
        for path, module, names in _from_imports(root, package)
        for name in names
        if public(module, name)
    ]
    assert offenders == []


def test_no_public_name_is_shadowed_by_a_submodule() -> None:
    # `import sandbox.x` sets the package's attribute `x` to the module, hiding an
    # exported `x` (hence sandbox.docker_api holds docker_client()).
    for package in ("sandbox", "judge"):
        for name in importlib.import_module(package).__all__:
            assert not _is_module(f"{package}.{name}") and f"{package}.{name}" not in packages_of(package), (
                name
            )


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same part (`root`, e.g. bench/) it imports, from every
    import statement of its file: at the top, in TYPE_CHECKING blocks (a circle there is a
    circle in the design) and inside functions (it only waits for the first call);
    relative imports resolved, `from pkg import mod` read as the module."""
    files = {".".join(p.relative_to(root.parent).with_suffix("").parts): p for p in root.rglob("*.py")}
    files = {name.removesuffix(".__init__"): path for name, path in files.items()}

    def known(dotted: str) -> str | None:
        while dotted and dotted not in files:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                targets.update(known(f"{module}.{a.name}") for a in node.names)
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of `graph` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for dep in sorted(graph[module]):
            if dep not in index:
                visit(dep)
                low[module] = min(low[module], low[dep])
            elif dep in stack:
                low[module] = min(low[module], index[dep])
        if low[module] == index[module]:
            part = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(part) > 1:
                circles.append(sorted(part))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


@pytest.mark.parametrize("part", PARTS)
def test_no_import_circle_inside_a_part(part: str) -> None:
    assert import_circles(import_graph(REPO / part)) == []


def test_the_circle_check_sees_type_only_and_lazy_imports(tmp_path: Path) -> None:
    # The two circles this check was written for (issue 43), as files: one held by a
    # TYPE_CHECKING import, one by an import inside a function, relative.
    report = tmp_path / "bench" / "report"
    api = tmp_path / "bench" / "session_api"
    for folder in (report, api):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (tmp_path / "bench" / "__init__.py").write_text("")
    (report / "metrics.py").write_text("from bench.report.provenance import DataProvenance\n")
    (report / "provenance.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bench.report.metrics import RunMetrics\n"
    )
    (api / "sessions.py").write_text("from bench.session_api import admission\n")
    (api / "admission.py").write_text("def created():\n    from .sessions import Session\n")
    (api / "models.py").write_text("from . import admission\n")  # one way only: no circle
    assert import_circles(import_graph(tmp_path / "bench")) == [
        ["bench.report.metrics", "bench.report.provenance"],
        ["bench.session_api.admission", "bench.session_api.sessions"],
    ]
