"""Replay golden tool calls in-process against a PostgreSQL database (no
containers, no MCP): the fast inner loop for server development, and the core
of the unit suite's golden replay (tests/unit/bench/replay/test_golden_replay.py).

    python -m bench.replay.local --domain retail --dsn 'host=/tmp port=55432 user=postgres dbname=tbx_retail' \
        [--tasks ID,ID] [--verbose]

The database's `public` schema is recreated once; then, for every task of the
release list in that domain: reload seed + data_patch (the same seeding code as
the sandbox), run every golden call through the pipeline the MCP server uses,
and check that no reply is an error envelope; for traced tasks also that the
initial canonical hash, every reply (byte for byte) and the final hash equal
the trace's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.dataset import Benchmark, DatasetError, load_benchmark
from judge import State, dump_canonical, state_hash
from servers.engine.schema import TableSpec
from servers.engine.seeding import copy_rows, create_schema, initial_rows
from servers.engine.store import TOOL_ROLE, Store
from servers.engine.tools import NOMINAL_NOW, Domain, ToolContext, run_tool
from servers.registry import load_domain

Rows = Mapping[str, list[dict[str, Any]]]


# ---- database ----------------------------------------------------------------
def ensure_tool_role(conn: psycopg.Connection[Any]) -> None:
    """Create the (cluster-wide) role the schema grants row access to, if missing."""
    conn.execute(
        sql.SQL(
            "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {}) THEN CREATE ROLE {}; END IF; END$$"
        ).format(sql.Literal(TOOL_ROLE), sql.Identifier(TOOL_ROLE))
    )


def fresh_schema(conn: psycopg.Connection[Any], tables: Iterable[TableSpec]) -> None:
    """Drop whatever `public` holds and create the domain's empty tables."""
    ensure_tool_role(conn)
    with conn.transaction():
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
        create_schema(conn, tables)


def reset_rows(
    conn: psycopg.Connection[Any], tables: Iterable[TableSpec], rows: Rows, only: Iterable[str] | None = None
) -> None:
    """Replace the rows of the domain's tables (or of the `only` ones) with `rows`, in
    one transaction. Much cheaper than recreating the schema; the hidden `_seq`
    keeps increasing, which keeps the storage order the same."""
    wanted = None if only is None else set(only)
    specs = [spec for spec in tables if wanted is None or spec.name in wanted]
    if not specs:
        return
    with conn.transaction():
        # One round trip for all the deletes (no parameters: several statements are allowed).
        conn.execute(
            sql.SQL(" ").join(sql.SQL("DELETE FROM {};").format(sql.Identifier(s.name)) for s in specs)
        )
        for spec in specs:
            copy_rows(conn, spec, rows.get(spec.name, []))


def seed_state(domain: Domain, seed: Rows, data_patch: Rows | None) -> dict[str, list[dict[str, Any]]]:
    """Seed + data_patch exactly as an attempt starts (wall-clock defaults at the nominal now)."""
    return initial_rows(domain.tables, seed, data_patch, NOMINAL_NOW)


# ---- replay ------------------------------------------------------------------
def is_error_reply(reply: str) -> bool:
    """A tool's error envelope (`{"error": ..., "tool": ...}`)."""
    payload = json.loads(reply)
    return isinstance(payload, dict) and "error" in payload


@dataclass
class TaskReplay:
    """One task replayed; `problems` is empty when everything matched."""

    task_id: str
    traced: bool
    calls: int = 0
    replies: list[str | None] = field(default_factory=list)  # None: the tool is not served
    initial: State | None = None  # canonical states (only when traced or asked for)
    final: State | None = None
    errors: list[str] = field(default_factory=list)  # unserved tools and error replies
    mismatches: list[str] = field(default_factory=list)  # differences from the trace

    @property
    def problems(self) -> list[str]:
        return self.errors + self.mismatches


def replay_task(
    conn: psycopg.Connection[Any],
    domain: Domain,
    rows: Rows,
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    trace: Mapping[str, Any] | None = None,
    *,
    task_id: str = "",
    keep_states: bool = False,
) -> TaskReplay:
    """Load `rows` (see `seed_state`) into the domain's tables (the schema must exist,
    see `fresh_schema`), run `calls` [(tool, parameters)] and compare with `trace`.
    The canonical states are taken for a traced task or when `keep_states`."""
    out = TaskReplay(task_id, trace is not None, calls=len(calls))
    reset_rows(conn, domain.tables, rows)
    if trace is not None or keep_states:
        out.initial = dump_canonical(conn, domain.tables)
    store = Store(conn, domain.tables, NOMINAL_NOW)
    for i, (tool, params) in enumerate(calls):
        t = domain.tool(tool)
        if t is None:
            out.replies.append(None)
            out.errors.append(f"call {i} {tool}: tool not served")
            continue
        reply = run_tool(t, ToolContext(db=store), dict(params))
        out.replies.append(reply)
        if is_error_reply(reply):
            out.errors.append(f"call {i} {tool}: error reply {reply[:300]}")
    if trace is not None or keep_states:
        out.final = dump_canonical(conn, domain.tables)
    if trace is not None:
        out.mismatches = trace_mismatches(out, calls, trace)
    return out


def trace_mismatches(
    run: TaskReplay, calls: Sequence[tuple[str, Mapping[str, Any]]], trace: Mapping[str, Any]
) -> list[str]:
    assert run.initial is not None and run.final is not None
    problems = []
    if state_hash(run.initial) != trace["initial_state_hash"]:
        problems.append("initial state hash differs from the trace's")
    recorded = trace["calls"]
    if len(recorded) != len(calls):
        problems.append(f"{len(calls)} golden calls, the trace has {len(recorded)}")
    for i, ((tool, params), want, got) in enumerate(zip(calls, recorded, run.replies, strict=False)):
        if (want["tool"], want["parameters"]) != (tool, dict(params)):
            problems.append(
                f"call {i} {tool}: the trace recorded {want['tool']}({json.dumps(want['parameters'])})"
            )
        elif got is not None and got != want["result"]:
            problems.append(
                f"call {i} {tool}({json.dumps(params)[:300]})\n"
                f"      want: {want['result'][:1500]}\n      got:  {got[:1500]}"
            )
    if state_hash(run.final) != trace["golden_state_hash"]:
        problems.append("final state hash differs from the trace's golden hash")
    return problems


def load_traces(root: Path, server: str) -> dict[str, dict[str, Any]]:
    """`traces/<server>.jsonl` by task id (absent file: no traced task)."""
    path = Path(root) / "traces" / f"{server}.jsonl"
    if not path.is_file():
        return {}
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return {tr["task_id"]: tr for tr in map(json.loads, lines)}


@dataclass
class DomainReplay:
    domain: str
    tasks: list[TaskReplay] = field(default_factory=list)

    @property
    def traced(self) -> int:
        return sum(t.traced for t in self.tasks)

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.tasks)


def replay_domain(
    conn: psycopg.Connection[Any],
    bench: Benchmark,
    domain_name: str,
    *,
    wanted: Iterable[str] = (),
    keep_states: bool = False,
) -> DomainReplay:
    """Every release task of the domain (or the `wanted` ids / uids) on `conn`'s
    database, whose `public` schema is recreated first. Canonical states are
    dropped after the comparison unless `keep_states`."""
    domain = load_domain(domain_name)
    seed = bench.seed(domain.module)
    traces = load_traces(bench.root, domain.server)
    pick = set(wanted)
    fresh_schema(conn, domain.tables)
    out = DomainReplay(domain.name)
    for task in bench.by_domain().get(domain.name, []):
        if pick and task.id not in pick and task.uid not in pick:
            continue
        init = bench.effective_init(task, domain.server)
        calls = [(c.tool or "", c.parameters) for c in init.golden_tool_interactions]
        run = replay_task(
            conn,
            domain,
            seed_state(domain, seed, init.data_patch),
            calls,
            traces.get(task.id),
            task_id=task.id,
            keep_states=keep_states,
        )
        if not keep_states:
            run.initial = run.final = None
        out.tasks.append(run)
    return out


# ---- CLI ---------------------------------------------------------------------
def state_diff(root: Path, task_id: str, state: State) -> list[str]:
    """Per-table differences from the trace's stored golden canonical state."""
    # Imported here: conformance pulls in the sandbox stack, which the
    # in-process loop needs only to explain a mismatch.
    from bench.replay.conformance import golden_canonical, table_differences

    golden = golden_canonical(root / "traces", task_id)
    return [f"state {d}" for d in table_differences(state, golden)] if golden is not None else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--domain", required=True)
    ap.add_argument("--dsn", required=True, help="a database of its own: its public schema is dropped")
    ap.add_argument("--dataset", type=Path, default=None, help="default: $TBX_DATASET")
    ap.add_argument("--tasks", default="", help="comma-separated task ids or uids (default: all)")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)

    try:
        bench = load_benchmark(args.dataset)
    except DatasetError as exc:  # no benchmark given, or bad data: a usage error, not a traceback
        ap.exit(2, f"{exc}\n")
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        result = replay_domain(
            conn, bench, args.domain, wanted=filter(None, args.tasks.split(",")), keep_states=True
        )
    matched = 0
    for run in result.tasks:
        problems = run.problems
        if run.final is not None and any("final state hash" in p for p in problems):
            problems += state_diff(bench.root, run.task_id, run.final)
        if not problems:
            matched += 1
            continue
        print(f"MISMATCH {run.task_id}")
        for p in problems if args.verbose else problems[:1]:
            print("   ", p if args.verbose else p[:600])
    held_out = len(result.tasks) - result.traced
    print(
        f"{result.domain}: matched {matched}/{len(result.tasks)} tasks "
        f"({result.traced} traced, {held_out} held out: error check only), {result.calls} calls"
    )
    return 0 if result.tasks and matched == len(result.tasks) else 1


if __name__ == "__main__":
    sys.exit(main())
