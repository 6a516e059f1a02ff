"""Base seed rows of the servers (the state before a task's data_patch).

* Export layout: ``servers/<module>/seed.json`` = ``{table: [rows]}``, exactly
  the tables as the reference server loads them -> :func:`load_seed`.
* ``thinkingbox-data`` checkout: ``initial_data/*.json`` files somewhere under
  ``servers/`` (e.g. ``servers/tb_business_ops_servers_202606/.../toolslib/
  sandbox_auto_insurance/policy/initial_data/drivers.json``) ->
  :func:`load_initial_data` returns ``{module_dir: {file stem: rows}}`` with
  ``module_dir`` the folder holding ``initial_data`` relative to the nearest
  ``toolslib`` folder (``sandbox_auto_insurance/policy``). Each domain's tables
  are derived from them by :mod:`bench.dataset.checkout_seeds`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servers.engine.rows import format_validation_error, validate_row
from servers.engine.tools import Domain

from .errors import DatasetError, Problem
from .parse import type_name
from .yamlio import read_json


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def seed_path(root: Path, module: str) -> Path:
    return Path(root) / "servers" / module / "seed.json"


def load_seed(root: Path, module: str) -> dict[str, list[dict[str, Any]]]:
    """``servers/<module>/seed.json`` of an export; raises DatasetError naming the file."""
    path = seed_path(root, module)
    rel = _rel(path, Path(root))
    if not path.is_file():
        raise DatasetError([Problem(path=rel, message=f"no seed file for server module {module!r}")])
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise DatasetError([Problem(path=rel, message=f"cannot read JSON: {exc}")]) from exc
    problems: list[Problem] = []
    if not isinstance(data, dict):
        problems.append(
            Problem(path=rel, message=f"must be a mapping of table -> list of rows, got {type_name(data)}")
        )
    else:
        for table, rows in data.items():
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                problems.append(Problem(path=rel, field=table, message="must be a list of rows (mappings)"))
    if problems:
        raise DatasetError(problems)
    return data


def check_seed(root: Path, domain: Domain, seed: dict[str, list[dict[str, Any]]]) -> list[Problem]:
    """What in an export's seed.json the domain's tables would refuse at seeding time:
    unknown tables and invalid rows, each named (found before any sandbox boots)."""
    rel = _rel(seed_path(root, domain.module), Path(root))
    specs = {t.name: t for t in domain.tables}
    problems = [
        Problem(
            path=rel, field=name, message=f"unknown table of {domain.server} (tables: {', '.join(specs)})"
        )
        for name in seed
        if name not in specs
    ]
    for name, rows in seed.items():
        spec = specs.get(name)
        if spec is None:
            continue
        for i, raw in enumerate(rows):
            try:
                validate_row(spec, raw)
            except ValidationError as exc:
                problems.append(
                    Problem(
                        path=rel, field=f"{name}[{i}]", message=f"invalid row: {format_validation_error(exc)}"
                    )
                )
    return problems


def _module_dir(initial_data_dir: Path, servers_dir: Path) -> str:
    owner = initial_data_dir.parent
    parts = owner.relative_to(servers_dir).parts
    if "toolslib" in parts:
        last = len(parts) - 1 - parts[::-1].index("toolslib")
        parts = parts[last + 1 :]
    return "/".join(parts) or "."


def find_initial_data(servers_dir: Path) -> dict[str, dict[str, Path]]:
    """``{module_dir: {stem: path}}`` of every ``initial_data/*.json`` under ``servers_dir``."""
    servers_dir = Path(servers_dir)
    out: dict[str, dict[str, Path]] = {}
    problems: list[Problem] = []
    for path in sorted(servers_dir.rglob("initial_data/*.json")):
        key = _module_dir(path.parent, servers_dir)
        files = out.setdefault(key, {})
        if path.stem in files:
            problems.append(
                Problem(
                    path=_rel(path, servers_dir),
                    message=f"same module dir {key!r} and name as {_rel(files[path.stem], servers_dir)}; "
                    "pass the one server package folder instead of the whole servers tree",
                )
            )
            continue
        files[path.stem] = path
    if problems:
        raise DatasetError(problems)
    return out


def load_initial_data(servers_dir: Path) -> dict[str, dict[str, Any]]:
    """``{module_dir: {stem: parsed JSON (normally a list of rows)}}``; best effort, see module doc."""
    out: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for key, files in find_initial_data(servers_dir).items():
        for stem, path in files.items():
            try:
                out.setdefault(key, {})[stem] = read_json(path)
            except (OSError, json.JSONDecodeError) as exc:
                problems.append(
                    Problem(path=_rel(path, Path(servers_dir)), message=f"cannot read JSON: {exc}")
                )
    if problems:
        raise DatasetError(problems)
    return out
