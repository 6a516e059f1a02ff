"""`tbx up`: one sandbox for debugging by hand, alive until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from sandbox.sandbox import AttemptHandle, Sandbox, SandboxRequest
from sandbox.services import Limits
from sandbox.sweeper import sweep
from servers.engine.seeding import initial_rows
from servers.registry import DOMAIN_MODULES, available_domains, load_domain

STALE_AFTER = 6 * 3600.0


def _request_from_seed_file(path: Path, domain_name: str | None, **kwargs: Any) -> SandboxRequest:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"tbx up: cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise SystemExit(f"tbx up: {path} must hold an object {{table: [rows]}}")
    if domain_name is None:
        matches = [d for d in available_domains() if set(data) <= {t.name for t in load_domain(d).tables}]
        if len(matches) != 1:
            raise SystemExit(
                f"tbx up: cannot tell which domain {path} seeds ({matches or 'none match'}); pass --domain "
                f"({', '.join(DOMAIN_MODULES)})"
            )
        domain_name = matches[0]
    domain = load_domain(domain_name)
    rows = initial_rows(domain.tables, data, None)
    return SandboxRequest(domains=[domain.name], seed={domain.name: rows}, **kwargs)


def _request_from_task(task_id: str, dataset: str | None, **kwargs: Any) -> SandboxRequest:
    from bench.attempt_state import sandbox_request
    from bench.dataset import default_root, load_benchmark

    bench = load_benchmark(Path(dataset) if dataset else default_root(), strict=False)
    matches = [t for t in bench.tasks if t.id == task_id or t.uid == task_id]
    if len(matches) != 1:
        raise SystemExit(f"tbx up: {task_id!r} matches {len(matches)} tasks; give the full id (file.py:uid)")
    return sandbox_request(bench, matches[0], **kwargs)


def describe(handle: AttemptHandle) -> str:
    lines = [f"sandbox {handle.attempt_id} (run {handle.run_id}) ready in {handle.timings.get('ready', 0):.2f}s"]
    for domain, url in handle.servers.items():
        lines.append(f"  MCP ({domain}):  {url}")
        lines.append(f"  psql:  {handle.pg.psql_command(domain)}")
    if handle.typesense_url:
        lines.append(f"  typesense:  {handle.typesense_url}  (api key {handle.typesense_api_key})")
    lines.append("Ctrl-C tears it down.")
    return "\n".join(lines)


def up_command(args: argparse.Namespace) -> int:
    sweep(older_than=STALE_AFTER, orphans=True)
    kwargs: dict[str, Any] = {"typesense": not args.no_typesense, "limits": Limits(runtime=args.runtime)}
    if args.pg_seed:
        request = _request_from_seed_file(Path(args.pg_seed), args.domain, **kwargs)
    elif args.task:
        request = _request_from_task(args.task, args.dataset, **kwargs)
    else:
        raise SystemExit("tbx up: give a TASK_ID or --pg-seed FILE.json")

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with Sandbox(request) as sb:
            assert sb.handle is not None
            print(sb.handle.model_dump_json(indent=2) if args.json else describe(sb.handle), flush=True)
            try:
                while not stop.wait(0.5):
                    pass
            except KeyboardInterrupt:
                pass
            print("tearing down ...", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
