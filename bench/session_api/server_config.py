"""One `server_config` entry of `/session_create` turned into what tbx's sandbox
preparation takes (bench.prepare.TaskPreparation) and what stays host-side.

    {"sources": [...], "data_patch": {...}, "golden_test_case": {...}, "rubrics": ..., "rubrics_yesno": [...]}

`data_patch` is upserted over the domain's seed rows from the served benchmark
(the same `initial_rows` an attempt of `tbx run` starts from) and `sources` go
into the session's own Typesense; `golden_test_case`, `rubrics` and
`rubrics_yesno` never leave this process (the golden end state is replayed in a
sandbox of its own, bench.session_api.golden_cache).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark
from bench.dataset.parse import parse_server_init
from bench.session_api.models import ApiError
from judge import YESNO_SERVERS
from servers.engine.seeding import DataPatchError, initial_rows
from servers.registry import load_domain, server_to_domain

# The reference's travel and neobank servers (YESNO_SERVERS) echo `rubrics_yesno` (and turn
# a null `rubrics` into {}); the other three pass `rubrics` through and have no such key.


class SessionServer(BaseModel):
    """A session's one server: what its sandbox is prepared with, and its golden material."""

    server: str  # the benchmark's server name (the `server_config` key)
    domain: str  # tbx's short name
    rows: dict[str, list[dict[str, Any]]]  # seed + data_patch, typed by the tables' models
    sources: list[dict[str, Any]] = Field(default_factory=list)
    golden_calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    rubrics: Any = None
    rubrics_yesno: list[str] | None = None  # None: the server has no such key
    # What else the entry carried, as sent: keys beside ENTRY_KEYS, and beside
    # GOLDEN_KEYS in golden_test_case. tbx reads none of them, but a harness may.
    extras: dict[str, Any] = Field(default_factory=dict)


# What an entry of server_config holds, and its golden_test_case (the spec's §3.1).
ENTRY_KEYS = frozenset({"sources", "data_patch", "golden_test_case", "rubrics", "rubrics_yesno"})
GOLDEN_KEYS = frozenset({"tool_interactions"})


def task_key(entry: SessionServer, tools: Iterable[str]) -> str:
    """What defines the task a session plays, hashed: its server, starting rows (seed +
    data_patch), policy sources, golden calls, rubrics, yes/no rubrics, anything else
    its entry carried, and the tools it may call (a set: their order changes nothing).
    Two sessions, or a session and a benchmark task, play one task iff their keys match."""
    material = [
        entry.server,
        entry.rows,
        entry.sources,
        entry.golden_calls,
        entry.rubrics,
        entry.rubrics_yesno,
        entry.extras,
        sorted(set(tools)),
    ]
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _extras(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k not in ENTRY_KEYS}
    golden = raw.get("golden_test_case")
    if isinstance(golden, dict):
        out.update({f"golden_test_case.{k}": v for k, v in golden.items() if k not in GOLDEN_KEYS})
    return out


def served_servers() -> list[str]:
    return sorted(server_to_domain())


def check_server(name: str) -> str:
    """The domain of server `name`, or the 400 naming the ones tbx serves."""
    domain = server_to_domain().get(name)
    if domain is None:
        raise ApiError(f"Server {name} does not exist (tbx serves: {', '.join(served_servers())})")
    return domain


def init_error(server: str, message: str) -> ApiError:
    # The reference's text: the server's init tool's own error object after the prefix.
    body = json.dumps({"status": "error", "message": message})
    return ApiError(f"Error calling {server} init: {body}")


def parse_entry(bench: Benchmark, server: str, raw: dict[str, Any]) -> SessionServer:
    domain_name = check_server(server)
    domain = load_domain(domain_name)
    rubrics = raw.get("rubrics")
    # tbx's dataset parser types rubrics as a list (v1 has only nulls); the API echoes
    # whatever the client sent, so it is not parsed here.
    parsed, problems = parse_server_init(
        {k: v for k, v in raw.items() if k != "rubrics"}, path="server_config", field=server
    )
    if parsed is None:
        raise init_error(server, "; ".join(str(p) for p in problems))
    try:
        rows = initial_rows(domain.tables, bench.seed(domain.module), parsed.data_patch)
    except DataPatchError as exc:
        # Its text names what failed, a patch's with "Data patch validation failed" already.
        raise init_error(server, str(exc)) from None
    yesno = None
    extras = _extras(raw)
    if server in YESNO_SERVERS:
        yesno = list(parsed.rubrics_yesno)
        rubrics = {} if rubrics is None else rubrics
    elif parsed.rubrics_yesno:  # not echoed by this server, yet part of what was sent
        extras["rubrics_yesno"] = list(parsed.rubrics_yesno)
    return SessionServer(
        server=server,
        domain=domain_name,
        rows=rows,
        sources=[s.model_dump() for s in parsed.sources],
        golden_calls=[(c.tool, dict(c.parameters)) for c in parsed.golden_tool_interactions if c.tool],
        rubrics=rubrics,
        rubrics_yesno=yesno,
        extras=extras,
    )


def check_tools(server: SessionServer | None, available: list[str]) -> None:
    """Every name of `available_tools` must be a tool of the session's server."""
    names = {t.name for t in load_domain(server.domain).tools} if server is not None else set()
    for tool in available:
        if tool not in names:
            raise ApiError(f"Tool {tool} does not exist")
