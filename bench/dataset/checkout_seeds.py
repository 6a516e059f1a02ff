"""Base seed rows of a ``thinkingbox-data`` checkout, derived into tbx's tables.

A checkout keeps each server's rows as ``initial_data/<stem>.json`` files in its
server package (``servers/<package>/<package>/toolslib/<folder>/initial_data/``);
each domain declares which folder feeds which of its tables
(`servers.engine.tools.Domain.seed_folders`). A file's rows go through the
table's own row model (defaults filled, extra fields dropped, values coerced) and
come out in the state form the export's ``servers/<module>/seed.json`` holds, so
both layouts seed the same canonical initial state.

Only data is read: ``servers/servers.yaml`` names the package of each server
(``python -m <package>.<module>``); nothing of the checkout is imported or run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servers.engine.rows import format_validation_error, to_state_row, validate_row
from servers.engine.tools import Domain

from .errors import DatasetError, Problem
from .parse import type_name
from .yamlio import parse_yaml, read_json, read_text

Rows = dict[str, list[dict[str, Any]]]
SERVERS_YAML = "servers/servers.yaml"


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _package_of(root: Path, server: str) -> str | None:
    """The Python package ``servers/servers.yaml`` starts ``server`` from, if it says."""
    try:
        config = parse_yaml(read_text(root / SERVERS_YAML))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    entry = (config.get("servers") or {}).get(server) if isinstance(config, dict) else None
    command = entry.get("command") if isinstance(entry, dict) else None
    if not isinstance(command, list) or "-m" not in command:
        return None
    at = command.index("-m") + 1
    module = command[at] if at < len(command) else None
    return module.split(".")[0] if isinstance(module, str) and module else None


def toolslib_dir(root: Path, server: str, holding: tuple[str, ...] = ()) -> Path:
    """The ``toolslib`` folder holding ``server``'s seed files; raises DatasetError.
    Without a servers.yaml entry, the one package whose ``toolslib`` holds every folder
    of ``holding`` (a checkout has other packages' toolslib folders beside it)."""
    package = _package_of(root, server)
    if package is not None:
        candidate = root / "servers" / package / package / "toolslib"
        if candidate.is_dir():
            return candidate
        raise DatasetError(
            [
                Problem(
                    path=_rel(candidate, root),
                    message=f"missing folder: {SERVERS_YAML} starts server {server!r} from package "
                    f"{package!r}, whose seed files live here",
                )
            ]
        )
    # No servers.yaml entry: the one server package a checkout of the v1.0 release has.
    found = sorted(
        p
        for p in (root / "servers").glob("*/*/toolslib")
        if p.is_dir() and all((p / folder).is_dir() for folder in holding)
    )
    if len(found) == 1:
        return found[0]
    message = (
        f"no server package found for {server!r} (no {SERVERS_YAML} entry and no servers/*/*/toolslib folder)"
        if not found
        else f"{SERVERS_YAML} names no package for {server!r} and there are several: "
        + ", ".join(_rel(p, root) for p in found)
    )
    raise DatasetError([Problem(path="servers", message=message)])


def _table_rows(
    domain: Domain, table: str, path: Path, root: Path
) -> tuple[list[dict[str, Any]], list[Problem]]:
    rel = _rel(path, root)
    if not path.is_file():
        return [], [Problem(path=rel, message=f"missing seed file of table {table!r} ({domain.server})")]
    try:
        data = read_json(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [], [Problem(path=rel, message=f"cannot read JSON: {exc}")]
    if isinstance(data, dict):
        # The reference's loader takes a list of rows; v1.0's travel Zendesk articles.json
        # is an object, and its server starts with no articles (the export's seed says 0).
        return [], []
    if not isinstance(data, list):
        return [], [Problem(path=rel, message=f"must be a list of rows, got {type_name(data)}")]
    spec = next(t for t in domain.tables if t.name == table)
    rows: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            problems.append(
                Problem(path=rel, field=f"[{i}]", message=f"a row must be a mapping, got {type_name(raw)}")
            )
            continue
        try:
            rows.append(to_state_row(spec, validate_row(spec, raw)))
        except ValidationError as exc:
            problems.append(
                Problem(
                    path=rel,
                    field=f"[{i}]",
                    message=f"invalid row of table {table!r}: {format_validation_error(exc)}",
                )
            )
    return rows, problems


def checkout_seed(root: Path, domain: Domain) -> Rows:
    """``{table: rows}`` of ``domain`` in the state form of the export's seed.json, in the
    domain's table order; every problem of every file in one DatasetError."""
    root = Path(root)
    base = toolslib_dir(root, domain.server, tuple(folder for _, folder in domain.seed_folders))
    seed: Rows = {}
    problems: list[Problem] = []
    for spec in domain.tables:
        try:
            rel = domain.seed_file(spec.name)
        except KeyError as exc:  # a domain declared without its checkout folders: tbx's bug
            raise RuntimeError(str(exc)) from None
        rows, probs = _table_rows(domain, spec.name, base / rel, root)
        seed[spec.name] = rows
        problems.extend(probs)
    if problems:
        raise DatasetError(problems)
    return seed
