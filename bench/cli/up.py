"""`tbx up`: one sandbox for debugging by hand, alive until Ctrl-C, behind the
session proxy: any MCP client can drive it through the printed proxy endpoint
(with its bearer token), exactly as an agent would (allow-listed tools only).
With --json it prints one JSON line once ready: mcp_url, token, url_with_token,
psql, servers (the direct server endpoints) with server_headers (the header
they demand), and the whole attempt handle.

The proxy watches the sandbox: if its containers or network vanish (a `tbx gc`
from another shell, a daemon restart), `tbx up` says so and exits 1."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.signals import run_async, stop_signals_as_interrupt
from sandbox.labels import ORPHAN_TTL

if TYPE_CHECKING:  # the heavy imports wait for the command to run (`tbx --help` stays quick)
    from sandbox import AttemptHandle, ProxyServer, Registration, SandboxRequest, ToolPolicy


def _request_from_seed_file(path: Path, domain_name: str | None, **kwargs: Any) -> SandboxRequest:
    from bench.prepare import seeded_request
    from servers.engine.seeding import DataPatchError, initial_rows
    from servers.registry import domain_names, load_domain

    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"tbx up: cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise SystemExit(f"tbx up: {path} must hold an object {{table: [rows]}}")
    if domain_name is None:
        matches = [d for d in domain_names() if set(data) <= {t.name for t in load_domain(d).tables}]
        if len(matches) != 1:
            raise SystemExit(
                f"tbx up: cannot tell which domain {path} seeds ({matches or 'none match'}); pass --domain "
                f"({', '.join(domain_names())})"
            )
        domain_name = matches[0]
    domain = load_domain(domain_name)
    try:
        rows = initial_rows(domain.tables, data, None)
    except DataPatchError as exc:
        raise SystemExit(f"tbx up: {path}: {exc}") from exc
    return seeded_request({domain.name: rows}, **kwargs)


def _request_from_task(task_id: str, dataset: str | None, **kwargs: Any) -> tuple[SandboxRequest, ToolPolicy]:
    from bench.cli.datasets import benchmark_for
    from bench.prepare import sandbox_request
    from bench.run.attempt import task_tool_policy

    bench = benchmark_for("tbx up", dataset)
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
    header = ": ".join(next(iter(handle.server_headers.items())))
    for domain, url in handle.servers.items():
        lines.append(f"  direct MCP ({domain}, no allow-list):  {url}  (header {header})")
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
            "server_headers": handle.server_headers,
            "attempt_id": handle.attempt_id,
            "run_id": handle.run_id,
            "typesense_url": handle.typesense_url,
            "handle": handle.model_dump(mode="json"),
        }
    )


def register(sub: Any) -> None:
    up = sub.add_parser("up", help="start one sandbox and keep it until Ctrl-C")
    up.add_argument(
        "task", nargs="?", help="task id, e.g. sandbox_external_retail_group1.py:test_case_ST002_001"
    )
    up.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET)")
    up.add_argument("--pg-seed", help="JSON file {table: [rows]} to seed instead of a task")
    up.add_argument(
        "--domain", help="the domain whose tables --pg-seed fills (default: guessed from table names)"
    )
    up.add_argument("--no-typesense", action="store_true", help="skip the policy-search container")
    up.add_argument("--runtime", help="container runtime, e.g. runsc (gVisor)")
    up.add_argument("--json", action="store_true", help="print the endpoints as one JSON line once ready")
    up.add_argument("--proxy-port", type=int, default=0, help="proxy port on 127.0.0.1 (default: any)")
    up.add_argument("--call-timeout", type=float, help="proxy per-call timeout in seconds")
    up.set_defaults(fn=up_command)


def up_command(args: argparse.Namespace) -> int:
    from sandbox import DEFAULT_CALL_TIMEOUT, Limits, ProxyServer, ToolPolicy, sweep

    sweep(older_than=ORPHAN_TTL, orphans=True)
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
    gone: str | None = None
    with stop_signals_as_interrupt(), proxy, contextlib.suppress(KeyboardInterrupt):
        gone = run_async(_hold(request, policy, proxy, as_json=args.json))
    return 0 if gone is None else 1


async def _hold(
    request: SandboxRequest, policy: ToolPolicy, proxy: ProxyServer, *, as_json: bool
) -> str | None:
    """The sandbox through the one sandbox path, registered with `proxy`, until a stop
    signal (None) or until the proxy's watch sees it vanish (what vanished)."""
    from sandbox import DockerProvider, open_sandbox, register_request

    provider = DockerProvider(teardown_inline=True)  # Ctrl-C returns once it is all gone
    async with open_sandbox(provider, request, label="tbx up") as session:
        reg = await proxy.aregister(register_request(session, request.attempt_id, policy))
        handle = session.handle
        assert handle is not None, "a Docker sandbox has its endpoints"
        print(endpoints_json(handle, reg) if as_json else describe(handle, reg), flush=True)
        try:
            while (gone := proxy.gone(reg.token)) is None:
                await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            print("tearing down ...", file=sys.stderr, flush=True)
            raise
        print(
            f"tbx up: {gone}; the proxy refuses every further call. Tearing down ...",
            file=sys.stderr,
            flush=True,
        )
    return gone
