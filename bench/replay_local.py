"""Replay golden tool calls in-process against a PostgreSQL database (no
containers, no MCP): the fast inner loop for server development.

    python -m bench.replay_local --domain retail --dsn 'host=/tmp port=55432 user=postgres dbname=tbx_retail' \
        [--tasks ID,ID] [--verbose]

Each task: reset the schema, seed + data_patch, run every golden call through
the same pipeline the MCP server uses, compare each reply with the trace and
the final canonical hash with the trace's golden hash.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import psycopg
import yaml

from judge.canonical import dump_canonical, state_hash
from servers.engine.seeding import initial_rows, load_state
from servers.engine.store import Store
from servers.engine.tools import ToolContext, run_tool
from servers.registry import load_domain

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared/benchmarks/thinkingbox-bench-v1"


def load_cases(dataset: Path, server: str) -> dict[str, dict[str, Any]]:
    cases = {}
    for path in sorted(glob.glob(str(dataset / "dataset/test_case" / server / "*.yaml"))):
        stem = Path(path).stem
        for tc in yaml.load(Path(path).read_text(), Loader=yaml.CSafeLoader)["test_cases"]:
            cases[f"{stem}.py:{tc['uid']}"] = tc
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    ap.add_argument("--tasks", default="")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)

    domain = load_domain(args.domain)
    seed = json.loads((args.dataset / "servers" / domain.module / "seed.json").read_text())
    cases = load_cases(args.dataset, domain.server)
    traces = [json.loads(line) for line in (args.dataset / "traces" / f"{domain.server}.jsonl").read_text().splitlines()]
    wanted = set(filter(None, args.tasks.split(",")))
    conn = psycopg.connect(args.dsn, autocommit=True)
    matched = total = 0
    for tr in traces:
        if wanted and tr["task_id"] not in wanted and tr["task_id"].split(":")[1] not in wanted:
            continue
        total += 1
        tc = cases[tr["task_id"]]
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
        init = tc["init"][domain.server]
        load_state(conn, domain.tables, initial_rows(domain.tables, seed, init.get("data_patch")))
        problems = []
        for i, call in enumerate(tr["calls"]):
            t = domain.tool(call["tool"])
            if t is None:
                problems.append(f"call {i} {call['tool']}: tool not implemented")
                continue
            got = run_tool(t, ToolContext(db=Store(conn, domain.tables)), call["parameters"])
            if got != call["result"]:
                problems.append(
                    f"call {i} {call['tool']}({json.dumps(call['parameters'])[:300]})\n"
                    f"      want: {call['result'][:1500]}\n      got:  {got[:1500]}"
                )
        state = dump_canonical(conn, domain.tables)
        if state_hash(state) != tr["golden_state_hash"]:
            cs = args.dataset / "traces/canonical_states" / (tr["task_id"].replace(":", "__") + ".json.gz")
            golden = json.loads(gzip.decompress(cs.read_bytes()))
            for table in sorted(set(golden) | set(state)):
                if golden.get(table) != state.get(table):
                    g, s = golden.get(table) or [], state.get(table) or []
                    detail = f"{len(s)} rows vs golden {len(g)}"
                    for a, b in zip(s, g, strict=False):
                        if a != b:
                            diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
                            detail += f"; first differing row {b.get('id', '')}: (got, golden) {diff}"
                            break
                    problems.append(f"state {table}: {detail}")
        if problems:
            print(f"MISMATCH {tr['task_id']}")
            if args.verbose:
                for p in problems:
                    print("   ", p)
            else:
                print("   ", problems[0][:600])
        else:
            matched += 1
    print(f"{domain.name}: matched {matched}/{total}")
    return 0 if matched == total else 1


if __name__ == "__main__":
    sys.exit(main())
