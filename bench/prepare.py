"""From a task to the sandbox request that starts its attempt: the domain's
base seed rows plus the task's data_patch (upsert), and the scenario's
policy documents. Nothing golden goes into the request.

The sandbox knows no domain; `TaskPreparation` is what it is handed to check
the request and fill the attempt's schemas and search index (a
`sandbox.preparer.Preparer`)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from bench.dataset import Benchmark, Task
from bench.dataset.merge import merge_init_config
from bench.defaults import POLICY_SEARCH, PolicySearch
from judge import State, dump_canonical
from sandbox import (
    CheckoutPackage,
    CheckoutServer,
    SandboxRequest,
    SeedError,
    TypesenseEndpoint,
    build_checkout_image,
    check_server,
    client_ssl_context,
)
from servers.engine.seeding import DataPatchError, initial_rows, load_state
from servers.registry import load_domain
from servers.toolsets import knowledge

Rows = dict[str, list[dict[str, Any]]]


class TaskPreparation(BaseModel):
    """An attempt's initial rows and policy documents, and how they go in. Not changed
    once made (frozen): its fingerprint is computed once."""

    model_config = ConfigDict(frozen=True)

    # domain -> table -> initial rows (validated, e.g. by servers.engine.seeding.initial_rows)
    rows: dict[str, Rows] = Field(default_factory=dict)
    # policy documents for the attempt's Typesense: [{"name": ..., "snippets": [...]}]
    sources: list[dict[str, Any]] = Field(default_factory=list)
    # hybrid: documents indexed with their embeddings (vector + keyword search); keyword: no vectors
    policy_search: PolicySearch = POLICY_SEARCH

    _fingerprint: str | None = PrivateAttr(default=None)

    def fingerprint(self) -> str:
        # Everything seed() and index() read: equal digests, equal canonical state. Asked at
        # every checkout (the pool's key, the prepared state's check): computed once.
        if self._fingerprint is None:
            self._fingerprint = hashlib.sha256(self.model_dump_json().encode()).hexdigest()
        return self._fingerprint

    def check(self, domains: Sequence[str]) -> None:
        """Reject seed rows the database would silently lose: tables the domain does not
        have and, for tables whose model forbids extra fields, columns it does not have."""
        for d in domains:
            load_domain(d)  # an unknown domain fails here
        for d, tables in self.rows.items():
            if d not in domains:
                raise SeedError(
                    f"seed rows for domain {d!r}, which the request does not start ({list(domains)})"
                )
            specs = {t.name: t for t in load_domain(d).tables}
            unknown = sorted(set(tables) - set(specs))
            if unknown:
                raise SeedError(f"seed for {d} names unknown tables: {', '.join(unknown)}")
            for name, rows in tables.items():
                spec = specs[name]
                if spec.extra != "forbid":
                    continue
                allowed = set(spec.field_names)
                for i, row in enumerate(rows):
                    extra = sorted(set(row) - allowed)
                    if extra:
                        raise SeedError(
                            f"seed for {d}: table {name} row {i} has unknown column(s) {', '.join(extra)} "
                            f"(the table's model forbids extra fields; validate rows with "
                            f"servers.engine.seeding.initial_rows)"
                        )

    def seed(self, conn: psycopg.Connection[Any], domain: str, tool_role: str) -> None:
        try:
            load_state(conn, load_domain(domain).tables, self.rows.get(domain, {}), tool_role)
        except (psycopg.Error, DataPatchError, KeyError, TypeError, ValueError) as exc:
            raise SeedError(f"seeding {domain} failed: {exc}") from exc

    def snapshot(self, conn: psycopg.Connection[Any], domain: str) -> State:
        """The canonical state the attempt's record starts from (the judge's dump)."""
        return dump_canonical(conn, load_domain(domain).tables)

    def index(self, typesense: TypesenseEndpoint) -> bool:
        if not self.sources:
            return False
        client = knowledge.make_client(typesense.url, typesense.api_key, verify=client_ssl_context())
        vectors = None
        if self.policy_search == "hybrid":  # computed on the host once per text, then cached
            vectors = knowledge.document_vectors(knowledge.snippet_texts(self.sources))
        knowledge.index_sources(client, typesense.collection, self.sources, embeddings=vectors)
        return True


def seeded_request(
    rows: dict[str, Rows], sources: list[dict[str, Any]] | None = None, **kwargs: Any
) -> SandboxRequest:
    """A request for the domains of `rows`, prepared with them (and `sources`)."""
    return SandboxRequest(
        domains=kwargs.pop("domains", None) or list(rows),
        prepare=TaskPreparation(rows=rows, sources=sources or []),
        **kwargs,
    )


def initial_state(bench: Benchmark, task: Task) -> Rows:
    domain = load_domain(task.domain)
    init = bench.effective_init(task)
    return initial_rows(domain.tables, bench.seed(domain.module), init.data_patch)


def task_preparation(
    bench: Benchmark,
    task: Task,
    *,
    typesense: bool = True,
    policy_search: PolicySearch = POLICY_SEARCH,
) -> TaskPreparation:
    init = bench.effective_init(task)
    return TaskPreparation(
        rows={task.domain: initial_state(bench, task)},
        sources=[s.model_dump() for s in init.sources] if typesense else [],
        policy_search=policy_search,
    )


def sandbox_request(
    bench: Benchmark,
    task: Task,
    *,
    typesense: bool = True,
    policy_search: PolicySearch = POLICY_SEARCH,
    **kwargs: Any,
) -> SandboxRequest:
    if bench.on_checkout_servers(task):  # its checkout's own servers, initialised at boot
        return SandboxRequest(checkout_servers=checkout_servers(bench, task), typesense=False, **kwargs)
    return SandboxRequest(
        domains=[task.domain],
        prepare=task_preparation(bench, task, typesense=typesense, policy_search=policy_search),
        typesense=typesense,
        **kwargs,
    )


# ---- a task on its checkout's own servers (servers.yaml, no tbx domain) ----------------------

# A pip constraints file applied when a checkout server package's dependencies are resolved
# (beside tbx's known-good additions: images/checkout-server/known/).
SERVER_CONSTRAINTS_ENV = "TBX_SERVER_CONSTRAINTS"
_images: dict[tuple[str, str | None], str] = {}  # (package folder, constraints) -> image tag
_lock = threading.Lock()


def checkout_image(bench: Benchmark, package: str) -> str:
    """The image of a checkout server package, built when its inputs changed (once per
    process, else found by its content tag)."""
    constraints = os.environ.get(SERVER_CONSTRAINTS_ENV) or None
    key = (str(bench.root / "servers" / package), constraints)
    with _lock:
        if key not in _images:
            package_ = CheckoutPackage(Path(key[0]), Path(constraints) if constraints else None)
            _images[key] = build_checkout_image(package_).tag
        return _images[key]


def checkout_servers(bench: Benchmark, task: Task, *, check: bool = True) -> list[CheckoutServer]:
    """The checkout servers a task runs on, in server_config order, each with its world state:
    the scenario's world_state merged with the test's init (bench.dataset.merge, key order kept)."""
    scen = bench.scenario_of(task)
    merged = merge_init_config(scen.world_state, {s: cfg.raw for s, cfg in task.init.items()})
    return checkout_servers_of(
        bench, {name: merged.get(name) or {} for name in bench.servers_of(task)}, check=check
    )


def checkout_servers_of(
    bench: Benchmark, server_config: dict[str, dict[str, Any]], *, check: bool = True
) -> list[CheckoutServer]:
    """A server_config (server name -> the world state its init gets) of the checkout's own
    servers, as the sandbox runs them: each with its image (built when its inputs changed)
    and, with `check`, started once in it (cached per image and command)."""
    out = []
    for name, world_state in server_config.items():
        decl = bench.checkout_servers[name]
        server = CheckoutServer(
            name=name,
            image=checkout_image(bench, decl.package),
            command=decl.command,
            env=decl.env,
            cwd=decl.cwd,
            checkout=str(bench.root),
            world_state=world_state,
        )
        if check:
            check_server(server)  # once per image and command (cached on disk)
        out.append(server)
    return out
