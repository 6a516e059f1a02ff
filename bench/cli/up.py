"""`tbx up`: one sandbox for debugging by hand, alive until Ctrl-C, behind the
session proxy: any MCP client can drive it through the printed proxy endpoint
(with its bearer token), exactly as an agent would (allow-listed tools only).
With --json it prints one JSON line once ready: mcp_url, token, url_with_token,
psql, servers (the direct server endpoints), and the whole attempt handle."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.cli.proxy import ToolPolicy, wait_for_interrupt
from bench.cli.signals import stop_signals_as_interrupt
from sandbox.labels import ORPHAN_TTL
from sandbox.proxy import DEFAULT_CALL_TIMEOUT, ProxyServer, Registration
from sandbox.sandbox import AttemptHandle, Sandbox, SandboxRequest
from sandbox.services import Limits
from sandbox.sweeper import sweep
from servers.engine.seeding import DataPatchError, initial_rows
from servers.registry import DOMAIN_MODULES, available_domains, load_domain

STALE_AFTER = ORPHAN_TTL


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
    try:
        rows = initial_rows(domain.tables, data, None)
    except DataPatchError as exc:
        raise SystemExit(f"tbx up: {path}: {exc}") from exc
    return SandboxRequest(domains=[domain.name], seed={domain.name: rows}, **kwargs)


def _request_from_task(task_id: str, dataset: str | None, **kwargs: Any) -> tuple[SandboxRequest, ToolPolicy]:
    from bench.cli.proxy import task_tool_policy
    from bench.dataset import default_root, load_benchmark
    from bench.run.request import sandbox_request

    bench = load_benchmark(Path(dataset) if dataset else default_root(), strict=False)
    matches = [t for t in bench.tasks if t.id == task_id or t.uid == task_id]
    if len(matches) != 1:
        raise SystemExit(f"tbx up: {task_id!r} matches {len(matches)} tasks; give the full id (file.py:uid)")
    return sandbox_request(bench, matches[0], **kwargs), task_tool_policy(bench, matches[0])


def describe(handle: AttemptHandle, reg: Registration | None = None) -> str:
    lines = [
        f"sandbox {handle.attempt_id} (run {handle.run_id}) ready in {handle.timings.get('ready', 0):.2f}s"
    ]
    if reg is not None:
        lines.append(f"  proxy MCP:  {reg.url}  (header Authorization: Bearer {reg.token})")
        lines.append(f"  proxy MCP, token in the path:  {reg.path_url}")
        lines.append(f"  {len(reg.tools)} tools listed through the proxy")
    for domain, url in handle.servers.items():
        lines.append(f"  direct MCP ({domain}, no allow-list):  {url}")
        lines.append(f"  psql:  {handle.pg.psql_command(domain)}")
    if handle.typesense_url:
        lines.append(f"  typesense:  {handle.typesense_url}  (api key {handle.typesense_api_key})")
    lines.append("Ctrl-C tears it down.")
    return "\n".join(lines)


def endpoints_json(handle: AttemptHandle, reg: Registration) -> str:
    """The one JSON line of `tbx up --json`."""
    first = next(iter(handle.servers))
    return json.dumps(
        {
            "mcp_url": reg.url,
            "token": reg.token,
            "authorization": f"Bearer {reg.token}",
            "url_with_token": reg.path_url,
            "tools": reg.tools,
            "psql": handle.pg.psql_command(first),
            "psql_commands": {d: handle.pg.psql_command(d) for d in handle.servers},
            "servers": handle.servers,
            "attempt_id": handle.attempt_id,
            "run_id": handle.run_id,
            "typesense_url": handle.typesense_url,
            "handle": handle.model_dump(mode="json"),
        }
    )


def up_command(args: argparse.Namespace) -> int:
    sweep(older_than=STALE_AFTER, orphans=True)
    kwargs: dict[str, Any] = {"typesense": not args.no_typesense, "limits": Limits(runtime=args.runtime)}
    policy = ToolPolicy()  # --pg-seed: every tool the server lists
    if args.pg_seed:
        request = _request_from_seed_file(Path(args.pg_seed), args.domain, **kwargs)
    elif args.task:
        request, policy = _request_from_task(args.task, args.dataset, **kwargs)
    else:
        raise SystemExit("tbx up: give a TASK_ID or --pg-seed FILE.json")

    proxy = ProxyServer(
        port=getattr(args, "proxy_port", 0) or 0,
        call_timeout=getattr(args, "call_timeout", None) or DEFAULT_CALL_TIMEOUT,
    )
    with stop_signals_as_interrupt(), Sandbox(request) as sb, proxy:
        assert sb.handle is not None
        reg = proxy.register(
            sb.handle.attempt_id,
            sb.handle.servers,
            policy.allowed_tools,
            policy.overrides,
            arg_overrides=policy.arg_overrides,
        )
        print(endpoints_json(sb.handle, reg) if args.json else describe(sb.handle, reg), flush=True)
        wait_for_interrupt()
        print("tearing down ...", file=sys.stderr, flush=True)
    return 0
