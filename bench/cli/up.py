"""`tbx up`: one sandbox for debugging by hand, alive until Ctrl-C, behind the
tool proxy: any MCP client can drive it through the printed proxy endpoint
(with its bearer token), exactly as an agent would (allow-listed tools only).
With --json it prints one JSON line once ready: mcp_url, token, url_with_token,
psql, servers (the direct server endpoints) with server_headers (the header
they demand), and the whole attempt handle.

The proxy watches the sandbox: if its containers or network vanish (a `tbx gc`
from another shell, a daemon restart), `tbx up` says so and exits 1.

`tbx up --from RUN_DIR ATTEMPT [--step N]` brings a recorded attempt's state back
(bench.run.revive): the sandbox prepared as the attempt's was, its first N recorded
calls (default all) replayed through the proxy, each printed with whether its reply
equals the recorded one. After a full replay the canonical hash is checked against the
recorded terminal state: a difference prints the first differing table and row and
exits 1 (after tearing the sandbox down) unless --keep-on-mismatch keeps it up anyway."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.signals import run_async, stop_signals_as_interrupt
from sandbox import ORPHAN_TTL

if TYPE_CHECKING:  # the heavy imports wait for the command to run (`tbx --help` stays quick)
    from bench.run.revive import RevivalPlan, Revived
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


def _request_from_task(
    task_id: str, dataset: str | None, release: str | None = None, **kwargs: Any
) -> tuple[SandboxRequest, ToolPolicy]:
    from bench.cli.datasets import benchmark_for
    from bench.prepare import sandbox_request
    from bench.run.attempt import task_tool_policy

    bench = benchmark_for("tbx up", dataset, release)
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
        if domain not in handle.checkout_servers:  # a checkout's own server keeps its own state
            lines.append(f"  psql:  {handle.pg.psql_command(domain)}")
    if handle.typesense_url:
        lines.append(f"  typesense:  {handle.typesense_url}  (api key {handle.typesense_api_key})")
    lines.append("Ctrl-C tears it down.")
    return "\n".join(lines)


def endpoints_json(handle: AttemptHandle, reg: Registration, extra: dict[str, Any] | None = None) -> str:
    """The one JSON line of `tbx up --json` (`extra`: --from's replayed calls and check)."""
    native = [d for d in handle.servers if d not in handle.checkout_servers]
    return json.dumps(
        {
            **(extra or {}),
            "mcp_url": reg.url,
            "token": reg.token,
            "authorization": f"Bearer {reg.token}",
            "url_with_token": reg.path_url,
            "tools": reg.tools,
            "psql": handle.pg.psql_command(native[0]) if native else None,
            "psql_commands": {d: handle.pg.psql_command(d) for d in native},
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
        "task",
        nargs="?",
        help="task id, e.g. sandbox_external_retail_group1.py:test_case_ST002_001; with --from: the "
        "attempt (its id as tbx view shows it, or TASK#REPEAT)",
    )
    up.add_argument(
        "--from",
        dest="from_run",
        metavar="RUN_DIR",
        help="bring back an attempt of this run directory (tbx run --out, env serve --out, "
        "session-proxy --record): seeded as it started, its recorded calls replayed through the proxy",
    )
    up.add_argument(
        "--step",
        type=int,
        metavar="N",
        help="with --from: replay only the first N recorded calls (0: the initial state; default: all)",
    )
    up.add_argument(
        "--keep-on-mismatch",
        action="store_true",
        help="with --from: keep the sandbox up when the replayed end state differs from the recorded one "
        "(default: report the first difference, tear down, exit 1)",
    )
    up.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET)")
    up.add_argument("--release", help="the release list TASK is in (default: the benchmark's)")
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

    kwargs: dict[str, Any] = {"typesense": not args.no_typesense, "limits": Limits(runtime=args.runtime)}
    if args.from_run is not None:
        return _up_from(args, kwargs)  # reads the run (bad input fails fast) before it sweeps
    if args.step is not None or args.keep_on_mismatch:
        raise SystemExit("tbx up: --step and --keep-on-mismatch go with --from RUN_DIR ATTEMPT")
    sweep(older_than=ORPHAN_TTL, orphans=True)
    policy = ToolPolicy()  # --pg-seed: every tool the server lists
    if args.pg_seed:
        request = _request_from_seed_file(Path(args.pg_seed), args.domain, **kwargs)
    elif args.task:
        request, policy = _request_from_task(args.task, args.dataset, args.release, **kwargs)
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


async def _until_gone(proxy: ProxyServer, token: str) -> str:
    """Wait until the proxy's watch sees the sandbox vanish (what vanished, said on stderr);
    a stop signal cancels the wait."""
    try:
        while (gone := proxy.gone(token)) is None:
            await asyncio.sleep(0.5)
    except asyncio.CancelledError:
        print("tearing down ...", file=sys.stderr, flush=True)
        raise
    print(
        f"tbx up: {gone}; the proxy refuses every further call. Tearing down ...", file=sys.stderr, flush=True
    )
    return gone


async def _hold(
    request: SandboxRequest, policy: ToolPolicy, proxy: ProxyServer, *, as_json: bool
) -> str | None:
    """The sandbox through the one sandbox path, registered with `proxy`, until a stop
    signal (None) or until the proxy's watch sees it vanish (what vanished)."""
    from sandbox import DockerProvider, open_sandbox, register_request

    provider = DockerProvider(teardown_inline=True)  # Ctrl-C returns once it is all gone
    async with open_sandbox(provider, request, label="tbx up") as lease:
        reg = await proxy.aregister(register_request(lease, request.attempt_id, policy))
        handle = lease.handle
        assert handle is not None, "a Docker sandbox has its endpoints"
        print(endpoints_json(handle, reg) if as_json else describe(handle, reg), flush=True)
        gone = await _until_gone(proxy, reg.token)
    return gone


def _up_from(args: argparse.Namespace, kwargs: dict[str, Any]) -> int:
    from bench.run.revive import plan_revival
    from sandbox import DEFAULT_CALL_TIMEOUT, ProxyServer, sweep

    if not args.task:
        raise SystemExit(
            "tbx up: --from RUN_DIR needs the ATTEMPT (its id as tbx view shows it, or TASK#REPEAT)"
        )
    if args.pg_seed:
        raise SystemExit("tbx up: --from and --pg-seed exclude each other")
    run_dir = Path(args.from_run)
    plan = plan_revival(
        run_dir,
        args.task,
        args.step,
        dataset=Path(args.dataset) if args.dataset else None,
        typesense=kwargs["typesense"],
        limits=kwargs["limits"],
    )
    sweep(older_than=ORPHAN_TTL, orphans=True)
    proxy = ProxyServer(
        port=args.proxy_port or 0,
        call_timeout=args.call_timeout or DEFAULT_CALL_TIMEOUT,
    )
    code = 0
    with stop_signals_as_interrupt(), proxy, contextlib.suppress(KeyboardInterrupt):
        code = run_async(_hold_revived(plan, proxy, as_json=args.json, keep=args.keep_on_mismatch))
    return code


def revival_lines(revived: Revived) -> list[str]:
    """What `tbx up --from` prints before `describe`: the calls replayed and the checks."""
    from bench.terminal_text import printable

    plan = revived.plan
    lines = [
        f"attempt {printable(plan.attempt_id)} ({printable(plan.task_id)}#{plan.repeat}) of {printable(plan.run_dir)}: "
        f"initial state as recorded ({revived.initial.recorded_hash[:12]}); "
        f"{plan.step} of {len(plan.calls)} recorded calls replayed through the proxy "
        f"in {revived.timings.get('replay', 0.0):.2f}s"
    ]
    for c in revived.replayed:
        status = "ok" if c.ok else "error"
        if c.ok != c.recorded_ok:
            status += f" (recorded: {'ok' if c.recorded_ok else 'error'})"
        lines.append(
            f"  #{c.index:<3} {printable(c.tool)}  {status}  "
            f"{'reply as recorded' if c.same_reply else 'reply differs from the recorded one'}"
            + ("  [prefix]" if c.prefix else "")
        )
    check = revived.check
    if check is not None and check.matched:
        lines.append(
            f"end state: canonical hash {check.replayed_hash[:12]} equals the recorded terminal state"
        )
    elif check is not None:
        lines.append(mismatch_text(revived))
    elif plan.full:
        lines.append(
            "end state: no terminal state was recorded (a limit took the database down): not checked"
        )
    else:
        lines.append(
            f"the state after call {plan.step}: no recorded state to check it against (only the end is recorded)"
        )
    return lines


def mismatch_text(revived: Revived) -> str:
    from bench.terminal_text import printable

    check = revived.check
    assert check is not None
    diff = check.first_difference
    return printable(
        f"MISMATCH: the replayed end state (hash {check.replayed_hash[:12]}) differs from the recorded terminal "
        f"state (hash {check.recorded_hash[:12]}); first difference: {diff.describe() if diff else 'none found'}"
    )


def revival_json(revived: Revived) -> dict[str, Any]:
    plan = revived.plan
    return {
        "from": {
            "run_dir": str(plan.run_dir),
            "attempt_id": plan.attempt_id,
            "task_id": plan.task_id,
            "repeat": plan.repeat,
            "step": plan.step,
            "calls": len(plan.calls),
            "prefix": plan.prefix,
        },
        "replayed": [c.model_dump(mode="json") for c in revived.replayed],
        "initial_check": revived.initial.model_dump(mode="json"),
        "check": None if revived.check is None else revived.check.model_dump(mode="json"),
        "timings": {k: round(v, 4) for k, v in revived.timings.items()},
    }


async def _hold_revived(plan: RevivalPlan, proxy: ProxyServer, *, as_json: bool, keep: bool) -> int:
    """Like `_hold`, for a revived attempt: 0 after a stop signal, 1 when the proxy's watch
    saw it vanish or (without `keep`) when the replayed end state is not the recorded one."""
    from bench.run.revive import revived
    from sandbox import DockerProvider

    provider = DockerProvider(teardown_inline=True)  # Ctrl-C returns once it is all gone
    async with revived(plan, provider, proxy) as live:
        reg = live.registration
        handle = live.lease.handle
        assert handle is not None, "a Docker sandbox has its endpoints"
        mismatch = live.check is not None and not live.check.matched
        if as_json:
            print(endpoints_json(handle, reg, revival_json(live)), flush=True)
        else:
            print("\n".join(revival_lines(live)), flush=True)
        if mismatch:
            print(f"tbx up: {mismatch_text(live)}", file=sys.stderr, flush=True)
            if not keep:
                print("tbx up: tearing down (--keep-on-mismatch keeps it up)", file=sys.stderr, flush=True)
                return 1
        if not as_json:
            print(describe(handle, reg), flush=True)
        await _until_gone(proxy, reg.token)
    return 1
