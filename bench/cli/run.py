"""`tbx run`: command-line front of the run coordinator (bench.run.coordinator)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.defaults import (
    DAEMON_WAIT,
    MAX_RETRIES,
    MAX_SETUP_RETRIES,
    POLICY_SEARCH,
    POLICY_SEARCHES,
    WALL_CLOCK,
)
from bench.run.causes import causes_text
from bench.run.errors import RunError, RunUsageError
from bench.terminal_text import printable

if TYPE_CHECKING:
    from bench.dataset import Task
    from bench.llm.config import ModelsConfig
    from bench.rollout.agents import AgentScript


def register(sub: Any) -> None:
    run = sub.add_parser("run", help="evaluate an agent: every (task, repeat) in its own fresh sandbox")
    run.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET)")
    run.add_argument("--release", help="release test list name (default: the benchmark's)")
    run.add_argument("--tasks", help="comma-separated task ids (or uids)")
    run.add_argument("--domain", action="append", help="only these domains")
    run.add_argument(
        "--agent",
        default="oracle",
        help="oracle | noop | chaos[:rate] | scripted (needs --script) | llm[:prompt] (needs --config)",
    )
    run.add_argument(
        "--script",
        metavar="FILE",
        help='the scripted agent\'s calls: JSON {"<task id>": {"calls": [{"tool": ..., "arguments": {...}}], '
        '"final": "..."}}; recorded in the manifest and the bundle',
    )
    run.add_argument("--config", help="models config YAML (agent, user, judge roles; prices)")
    run.add_argument("--repeat", type=int, default=20, help="attempts per task (k)")
    run.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="attempts at once (default: built-in agents one per core; model agents from memory, up to 8)",
    )
    run.add_argument("--out", required=True, help="output directory (re-running resumes it)")
    run.add_argument(
        "--retry-errors", action="store_true", help="re-run only attempts that ended in a system error"
    )
    run.add_argument(
        "--max-retries",
        type=int,
        default=MAX_RETRIES,
        help="times a (task, repeat) whose try failed with a system error after the agent's first turn "
        "is tried again in the run (default %(default)s; 0 = never)",
    )
    run.add_argument(
        "--max-setup-retries",
        type=int,
        default=MAX_SETUP_RETRIES,
        help="times a try lost before the agent's first turn (its sandbox's boot or checkout, the "
        "golden replay) is tried again, apart from --max-retries (default %(default)s; 0 = never)",
    )
    run.add_argument(
        "--daemon-wait",
        type=float,
        default=DAEMON_WAIT,
        help="seconds the run holds new tries while the Docker daemon does not answer, "
        "then stops (resumable: re-run the same command); default %(default)g",
    )
    run.add_argument("--wall-clock", type=float, default=WALL_CLOCK, help="seconds per attempt")
    run.add_argument("--runtime", help="container runtime, e.g. runsc")
    run.add_argument("--golden-cache", help="golden end-state cache directory (default ~/.cache/tbx/golden)")
    run.add_argument("--name", help="run name shown in reports")
    run.add_argument(
        "--skip-rubrics", action="store_true", help="judge rubric tasks on state alone (no judge model)"
    )
    run.add_argument(
        "--warm",
        type=int,
        default=None,
        help="sandboxes booted ahead per domain (a warm pool; 0 = cold start per attempt; default: concurrency)",
    )
    run.add_argument(
        "--restart-on-change",
        action="store_true",
        help="if --out holds results of another bundle (code, dataset, images, agent, config), "
        "move them to OUT/superseded/ and start over instead of refusing",
    )
    run.add_argument(
        "--plain",
        action="store_true",
        help="plain progress lines instead of the live view (automatic off a terminal)",
    )
    run.add_argument(
        "--policy-search",
        choices=POLICY_SEARCHES,
        default=POLICY_SEARCH,
        help="policy-search tool: vector + keyword hybrid (default, as the benchmark specifies) "
        "or the keyword-only fallback; recorded in the manifest",
    )
    run.add_argument(
        "--harness",
        metavar="NAME[,NAME]",
        help="harness interventions on (error-hints, state-check, approval; docs/harness.md); "
        "default: the --config's `harness:`, else none; recorded in the manifest and the bundle",
    )
    run.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run the attempts on a Ray cluster's nodes (HOST:PORT of the head, or auto; "
        "or `ray:` in the --config file); needs the ray extra (pip install 'tbx[ray]'); docs/scale-out.md",
    )
    run.set_defaults(fn=run_command)


def select_tasks(bench: Any, tasks: str | None, domains: list[str] | None) -> list[Task]:
    selected = list(bench.tasks)
    if tasks:
        wanted = set(filter(None, tasks.split(",")))
        selected = [t for t in selected if t.id in wanted or t.uid in wanted]
        unknown = wanted - {t.id for t in selected} - {t.uid for t in selected}
        if unknown:
            raise RunError(f"tbx run: unknown task(s): {', '.join(sorted(unknown))}")
    if domains:
        selected = [t for t in selected if t.domain in set(domains)]
    if not selected:
        raise RunError("tbx run: no task selected")
    return selected


def needed_roles(agent: str, tasks: list[Task], skip_rubrics: bool) -> list[str]:
    """The model roles a run of `agent` on `tasks` calls: none for a built-in agent."""
    from bench.rollout.agents import BUILTIN_AGENTS

    if agent.split(":")[0] in BUILTIN_AGENTS:
        return []
    roles = ["agent", "user"]
    if not skip_rubrics and any(t.has_rubrics for t in tasks):
        roles.append("judge")
    return roles


def check_oracle(agent: str, bench: Any, tasks: list[Task]) -> None:
    """The oracle replays golden calls: a task on its checkout's own servers has none
    (its test function alone grades it), so such a run is refused before anything starts."""
    if agent.partition(":")[0] != "oracle":
        return
    checkout = [t.id for t in tasks if bench.on_checkout_servers(t)]
    if checkout:
        from bench.rollout.brief import SCRIPTED_AGENT

        shown = ", ".join(checkout[:3]) + (f" and {len(checkout) - 3} more" if len(checkout) > 3 else "")
        raise RunUsageError(
            f"tbx run: --agent oracle replays golden calls, and {len(checkout)} selected task(s) run on "
            f"their checkout's own servers with none ({shown}): their test functions grade them; "
            f"use --agent {SCRIPTED_AGENT} --script FILE (the calls to play) or a model agent (--config)"
        )


def agent_script_for(agent: str, script: str | None, tasks: list[Task]) -> AgentScript | None:
    """The --script file of a `scripted` run, read before anything is written (a malformed
    file, or --script without `scripted` or the reverse, is a usage error); keys that name
    no task of the run are a warning."""
    from bench.rollout.agents import AgentScriptError, load_agent_script
    from bench.rollout.brief import SCRIPTED_AGENT

    scripted = agent.partition(":")[0] == SCRIPTED_AGENT
    if script is None:
        if scripted:
            raise RunUsageError(f"tbx run: agent {agent!r} needs --script FILE (the calls it plays)")
        return None
    if not scripted:
        raise RunUsageError(f"tbx run: --script is for --agent {SCRIPTED_AGENT}, not {agent!r}")
    try:
        loaded = load_agent_script(script)
    except AgentScriptError as exc:
        raise RunUsageError(f"tbx run: --script: {exc}") from None
    unknown = loaded.unknown_keys((t.id, t.uid) for t in tasks)
    if unknown:
        _stderr(
            f"tbx run: warning: --script names {len(unknown)} task(s) not in this run: {', '.join(unknown)}"
        )
    return loaded


def check_endpoints(config: ModelsConfig, roles: list[str]) -> dict[str, Any]:
    """Fail before anything is written when a model endpoint is down, refuses the key or
    serves no chat completions; a busy one (connected, no answer within the role's timeout)
    is said and the run goes on. What each server said of itself, for the manifest."""
    import asyncio

    from bench.env.endpoint_probe import check_roles, manifest_servers
    from bench.llm.config import ModelsConfigError

    probes = asyncio.run(check_roles({r: config.role(r) for r in roles}))
    for result in probes.values():
        if result.state == "key":
            raise ModelsConfigError(f"tbx run: {result.detail}")
        if result.state == "busy":
            print(f"tbx run: {printable(result.detail)}; going on", file=sys.stderr)
        elif not result.ok:
            raise RunError(f"tbx run: {result.detail}")
    return manifest_servers(probes)


def _check_writable(out: Path) -> None:
    """Raise (as mkdir would) when `out` could not be made or written, without making it."""
    import errno
    import os

    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(out))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(out))


def _stderr(message: str) -> None:
    """The coordinator's notices: they quote task ids and error texts (bench.terminal_text)."""
    print(printable(message), file=sys.stderr)


def _by_cause(counts: Mapping[str, int]) -> str:
    """` (container 2, model endpoint 1)`, or nothing without errors."""
    text = causes_text(counts)
    return f" ({text})" if text else ""


def run_command(args: argparse.Namespace) -> int:
    from bench.cli.datasets import benchmark_for
    from bench.cli.progress import RunProgress
    from bench.cli.signals import run_async, stop_signals_as_interrupt
    from bench.harness_names import HarnessError, parse_harness
    from bench.llm.config import check_models_config, load_models_config
    from bench.rollout.agents import BUILTIN_AGENTS
    from bench.run.coordinator import Coordinator, RunOptions
    from bench.run.retries import RetryPolicy
    from bench.run.sizing import check_memory, default_concurrency

    # The cheap checks first, nothing written: the config file, the data, the keys the roles
    # need (usage errors), then --out (one that cannot be written fails before endpoints and
    # Docker), then the endpoints.
    config = load_models_config(args.config) if args.config else None
    bench = benchmark_for("tbx run", args.dataset, args.release)
    tasks = select_tasks(bench, args.tasks, args.domain)
    check_oracle(args.agent, bench, tasks)
    agent_script = agent_script_for(args.agent, args.script, tasks)
    builtin = args.agent.split(":")[0] in BUILTIN_AGENTS
    if not builtin and config is None:
        raise RunError(f"tbx run: agent {args.agent!r} needs a model config (--config FILE)")
    roles = needed_roles(args.agent, tasks, args.skip_rubrics)
    if config is not None:
        check_models_config(config, roles, args.config)
    _check_writable(Path(args.out))
    model_servers = check_endpoints(config, roles) if config is not None and roles else {}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    try:
        harness = parse_harness(args.harness) if args.harness is not None else ()
    except HarnessError as exc:
        raise RunError(f"tbx run: --harness: {exc}") from None
    if args.harness is None and config is not None:
        harness = config.harness
    executor = None
    args.ray = args.ray or (config.ray if config is not None else None)
    if args.ray:
        # Connected before anything starts: a dead address or a missing extra fails here.
        from bench.run.ray_executor import RayExecutor, cluster_slots, connect

        connect(args.ray)
        # Each node admits its own attempts (its tbx_attempt slots); the driver only bounds them.
        concurrency = args.concurrency or max(1, cluster_slots())
        warm = args.warm or 0
        executor = RayExecutor(args.ray, config=config, warm=warm)
    else:
        concurrency = args.concurrency or default_concurrency(model_agent=not builtin)
        warm = check_memory(bench, tasks, concurrency, args.warm, runtime=args.runtime)
    opts = RunOptions(
        out=Path(args.out),
        agent=args.agent,
        repeat=args.repeat,
        concurrency=concurrency,
        wall_clock=args.wall_clock,
        runtime=args.runtime,
        retry_errors=args.retry_errors,
        retries=RetryPolicy(max_retries=args.max_retries, max_setup_retries=args.max_setup_retries),
        daemon_wait=args.daemon_wait,
        golden_cache=Path(args.golden_cache) if args.golden_cache else None,
        run_name=args.name,
        skip_rubrics=args.skip_rubrics,
        warm=warm,
        restart_on_change=args.restart_on_change,
        policy_search=args.policy_search,
        harness=harness,
        model_servers=model_servers,
        agent_script=agent_script,
        agent_script_path=Path(args.script).resolve() if args.script else None,
    )
    opts.out.mkdir(parents=True, exist_ok=True)
    progress = RunProgress(live=False if args.plain else None)
    coordinator = Coordinator(bench, opts, config, progress=progress, notice=_stderr, executor=executor)
    print(
        f"tbx run: {len(tasks)} tasks x {opts.repeat} repeats, agent {opts.agent}"
        f"{' + ' + ','.join(harness) if harness else ''}, "
        f"concurrency {concurrency}, warm {warm}{f', on Ray at {args.ray}' if args.ray else ''} -> {opts.out}",
        file=sys.stderr,
    )
    with stop_signals_as_interrupt(), progress.attach(coordinator):
        counts = run_async(coordinator.run(tasks))
    print(
        f"done: {counts['done']} attempts, {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['errors']} system errors{_by_cause(coordinator.error_causes)}, "
        f"{counts['retried']} tries retried{_by_cause(coordinator.retried_causes)}"
        f"{f', {coordinator.judge_errors} judge errors' if coordinator.judge_errors else ''}; "
        f"results in {opts.out}/results.jsonl",
        file=sys.stderr,
    )
    return 0 if counts["errors"] == 0 else 3
