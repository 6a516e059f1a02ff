"""Container kills during a model-agent run (issue 38, "Faults"): which phase each
kill hit, and what it cost.

A `tbx run` of the demo pack's retail tasks with the model stub as the agent
(benchmarks/stub_model.py: an OpenAI-compatible endpoint on 127.0.0.1 playing the
golden calls, `--delay` s per completion), 24 attempts at concurrency 4 with the
default warm pool, while a thread kills a random running retail server container of
that run (`docker kill`, SIGKILL) every `--kill-every` s, `--kills` times. The golden
states are computed before the run (as a cache filled by an earlier run has them), so
the kills land in the attempts' phases; `--fresh-golden` starts the run with an empty
cache instead, and the first kills land in its golden replays.

Each kill's phase is what its set was doing when it was killed, seen from outside: a
golden replay's set (no Typesense), one an attempt holds (its CPU weight raised at the
checkout, read from the cgroup), a warm spare whose server answers (the pool) or one
still booting; and what the run recorded of the container: an errors.jsonl line naming
it (its `phase`: checkout, agent, terminal_dump) or a warning that the set was replaced
before it was used. Outcomes:

  golden replay, boot, pool (a spare waiting), checkout   harmless: replaced, no try lost
  mid-attempt, grading (the terminal dump)                 one retried try
  teardown (after the terminal state was read)             harmless
  a system error still there after the retries             "LEFT" (the issue's bug)

    .venv/bin/python benchmarks/kill_chaos.py                      # the issue's scenario
    .venv/bin/python benchmarks/kill_chaos.py --kills 12 --kill-every 4 --json out.json
    .venv/bin/python benchmarks/kill_chaos.py --runs 5 --cpu-hogs 2   # issue 43: beside CPU-bound processes

`--cpu-hogs N` starts N CPU-bound processes (`while 1: pass`) before each run and
kills them after it; `--runs N` repeats the run and prints one line per run (attempts,
kills, system errors left, retried tries charged to --max-retries and those lost before
the agent's first turn, which are not: bench.run.retries, wall, load).

Exit status 0 when every (task, repeat) has its row, every row passed, no system error
is left and nothing of the run is left on the daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import docker  # noqa: E402
from stub_model import AGENT_MODEL, USER_MODEL, StubModel  # noqa: E402

from bench.dataset import load_benchmark  # noqa: E402
from bench.run.golden import GoldenStore  # noqa: E402
from bench.run.retries import BEFORE_THE_AGENT  # noqa: E402
from sandbox.cgroups import container_dirs  # noqa: E402
from sandbox.cpu_weight import RUNNING_SHARES, shares_to_weight  # noqa: E402
from sandbox.mcp_server import SERVER_PORT  # noqa: E402

PACK = REPO / "bench" / "packs" / "demo"
ROLE = "server-retail"
PHASES = (
    "golden replay",
    "boot",
    "pool",
    "checkout",
    "held (checkout to grading)",
    "mid-attempt",
    "grading",
    "teardown",
    "unknown",
)


class Killer(threading.Thread):
    """Kills a random running `ROLE` container of the process `pid` every `every` s, `kills` times."""

    def __init__(self, pid: int, every: float, kills: int, seed: int):
        super().__init__(daemon=True)
        self.pid, self.every, self.kills = str(pid), every, kills
        self.rng = random.Random(seed)
        self.killed: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        client = docker.from_env(timeout=60)
        try:
            while len(self.killed) < self.kills and not self.stop.wait(self.every):
                try:
                    self._one(client)
                except Exception as exc:  # a container gone meanwhile: next tick
                    print(f"kill_chaos: {exc.__class__.__name__}: {str(exc)[:160]}", file=sys.stderr)
        finally:
            client.close()

    def _one(self, client: docker.DockerClient) -> None:
        running = client.containers.list(
            filters={"label": [f"tbx.pid={self.pid}", f"tbx.role={ROLE}"], "status": "running"},
            ignore_removed=True,
        )
        if not running:
            return
        victim = self.rng.choice(running)
        seen = where(client, victim)
        victim.kill()
        self.killed.append({"at": round(time.monotonic() - self.t0, 1), "name": victim.name, **seen})


def held(container_id: str, parent: str) -> bool | None:
    """Whether an attempt holds the container's set: its CPU weight was raised from the
    boot weight at the checkout (sandbox.cpu_weight; the kernel's value, read from the
    cgroup); None where this host's cgroups do not show it."""
    for directory, version in container_dirs(container_id, "cpu", parent):
        path = directory / ("cpu.shares" if version == 1 else "cpu.weight")
        try:
            value = int(path.read_text())
        except (OSError, ValueError):
            continue
        running = RUNNING_SHARES if version == 1 else shares_to_weight(RUNNING_SHARES)
        return value == running
    return None


def answers(ip: str, port: int = SERVER_PORT) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


def where(client: docker.DockerClient, victim: Any) -> dict[str, Any]:
    """What the victim's set was doing, as seen from outside just before the kill: a golden
    replay's (no Typesense: bench.replay.sandboxed), one an attempt holds (its CPU weight
    raised at the checkout), a spare whose server answers (booted, in the pool) or one
    still booting."""
    sandbox = victim.labels.get("tbx.attempt", "")
    peers = client.containers.list(all=True, filters={"label": f"tbx.attempt={sandbox}"}, sparse=True)
    roles = {(p.attrs.get("Labels") or {}).get("tbx.role", "") for p in peers}
    if "typesense" not in roles:
        seen = "golden replay"
    elif held(victim.id, str(victim.attrs["HostConfig"].get("CgroupParent") or "")):
        seen = "held"
    else:
        networks = victim.attrs["NetworkSettings"]["Networks"] or {}
        ips = [n.get("IPAddress") for n in networks.values() if n.get("IPAddress")]
        seen = "pool" if ips and answers(ips[0]) else "boot"
    return {"sandbox": sandbox, "seen": seen}


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# What the victim's set was doing when it was killed (`where`) -> the phase, when the run
# recorded nothing more precise of it.
SEEN_PHASE = {"golden replay": "golden replay", "boot": "boot", "pool": "pool", "held": "teardown"}
# An errors.jsonl line's `phase` (where the try failed: bench.run.attempt.TryPhase) -> the phase.
ERROR_PHASE = {
    "golden": "golden replay",
    "agent": "mid-attempt",
    "terminal_dump": "grading",
    "grading": "grading",
}
# The run's warning when it replaced a set lost before any try was (sandbox.pool,
# sandbox.checkout, bench.run.golden): it names the container and says another took its place.
REPLACED = re.compile(r"lost .*; (checking out|replaying in|taking) another")


def error_phase(line: dict[str, Any], seen: str | None = None) -> str:
    """The phase of an errors.jsonl line; a checkout's (boot, warm spare or the set handed
    over) is told apart by what the set was doing when it was killed."""
    phase = str(line.get("phase") or "")
    if phase == "checkout" or not phase:  # a tbx before errors.jsonl said where: what was seen
        return {"boot": "boot", "pool": "pool", "golden replay": "golden replay"}.get(
            seen or "", "checkout" if phase else "held (checkout to grading)"
        )
    return ERROR_PHASE.get(phase, phase)


def classify(kill: dict[str, Any], errors: list[dict[str, Any]], log: str) -> None:
    """Fill `kill` with its phase and outcome, from what the run recorded of its container."""
    name, seen = kill["name"], kill["seen"]
    hit = [e for e in errors if name in str(e.get("error", ""))]
    if hit:
        line = hit[0]
        kill["phase"] = error_phase(line, seen)
        kill["outcome"] = "one retry" if line.get("retried") else "LEFT (system error row)"
        kill["error"] = str(line["error"])[:200]
        kill["task"], kill["repeat"], kill["try"] = line["task_id"], line["repeat"], line["try"]
        return
    if any(name in text and REPLACED.search(text) for text in log.splitlines()):
        kill["phase"] = "checkout" if seen == "held" else SEEN_PHASE[seen]
        kill["outcome"] = "harmless (replaced)"
        return
    kill["phase"] = SEEN_PHASE[seen]
    kill["outcome"] = "harmless"


def cpu_hogs(n: int, bound: float) -> list[subprocess.Popen[bytes]]:
    """`n` CPU-bound processes; the caller kills them, and each ends by itself after
    `bound` s should the caller die first."""
    spin = f"import time\nend = time.monotonic() + {bound}\nwhile time.monotonic() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--kill-every", type=float, default=6.0)
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds per stub completion")
    ap.add_argument("--max-retries", type=int, default=None, help="tbx run --max-retries (default: its own)")
    ap.add_argument("--max-setup-retries", type=int, default=None, help="default: tbx run's own")
    ap.add_argument("--cpu-hogs", type=int, default=0, help="CPU-bound processes beside each run")
    ap.add_argument("--runs", type=int, default=1, help="runs in a row, one table line each")
    ap.add_argument("--warm", type=int, default=None, help="tbx run --warm (default: its own)")
    ap.add_argument("--seed", type=int, default=38, help="the kill thread's random choices")
    ap.add_argument("--golden-cache", type=Path, default=None, help="default: a new one, filled first")
    ap.add_argument("--fresh-golden", action="store_true", help="start the run with an empty golden cache")
    ap.add_argument("--out", type=Path, default=None, help="default: a temporary directory")
    ap.add_argument("--json", type=Path, default=None, help="write the summary here too")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run, then it is killed")
    args = ap.parse_args()

    if args.golden_cache is None and not args.fresh_golden:  # filled by the first run, kept for the others
        args.golden_cache = Path(tempfile.mkdtemp(prefix="tbx-kill-chaos-golden-"))
    summaries = []
    for i in range(args.runs):
        hogs = cpu_hogs(args.cpu_hogs, bound=args.timeout + 300)
        try:
            summaries.append(one_run(args, seed=args.seed + i))
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        if args.json is not None:  # after each run: a series cut short keeps what it measured
            args.json.write_text(json.dumps(summaries if args.runs > 1 else summaries[0], indent=2))
    if args.runs > 1:
        print(
            f"\n{'run':>3} {'attempts':>8} {'kills':>5} {'sys err':>7} {'charged':>7} {'uncharged':>9} {'wall s':>7} load"
        )
        for i, s in enumerate(summaries, 1):
            print(
                f"{i:>3} {s['attempts']:>8} {len(s['kills']):>5} {s['system_error_rows']:>7} "
                f"{s['retries_charged']:>7} {s['retries_uncharged']:>9} {s['wall_s']:>7} "
                f"{s['load_before'][0]:.1f} -> {s['load_after'][0]:.1f}"
            )
    return 0 if all(s["ok"] for s in summaries) else 1


def one_run(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    bench = load_benchmark(PACK, strict=False)
    tasks = [t.id for t in bench.tasks if t.domain == "retail"]
    repeats = math.ceil(args.attempts / len(tasks))
    work = Path(tempfile.mkdtemp(prefix="tbx-kill-chaos-"))
    out = args.out or work / "run"
    golden = args.golden_cache or work / "golden"
    if not args.fresh_golden:
        store = GoldenStore(bench, golden)
        for task in tasks:
            asyncio.run(store.get(bench.task(task)))
    stub = StubModel(bench, delay=args.delay).start()
    role = {"base_url": stub.base_url, "api_key": "stub", "timeout": 60}
    config = {"agent": {"model": AGENT_MODEL, **role}, "user": {"model": USER_MODEL, **role}}
    (work / "models.json").write_text(json.dumps(config))
    cmd = [sys.executable, "-m", "bench.cli", "run", "--dataset", str(PACK), "--tasks", ",".join(tasks)]
    cmd += ["--agent", "llm", "--config", str(work / "models.json"), "--repeat", str(repeats)]
    cmd += ["--concurrency", str(args.concurrency)]
    if args.max_retries is not None:
        cmd += ["--max-retries", str(args.max_retries)]
    if args.max_setup_retries is not None:
        cmd += ["--max-setup-retries", str(args.max_setup_retries)]
    cmd += ["--skip-rubrics", "--plain", "--out", str(out), "--golden-cache", str(golden)]
    if args.warm is not None:
        cmd += ["--warm", str(args.warm)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    stderr_path = work / "run.stderr"
    load_before = os.getloadavg()
    t0 = time.monotonic()
    with stderr_path.open("w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        killer = Killer(proc.pid, args.kill_every, args.kills, seed)
        killer.start()
        try:
            code = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        killer.stop.set()
        killer.join(10)
    wall = time.monotonic() - t0
    load_after = os.getloadavg()
    stub.close()

    errors = lines(out / "errors.jsonl")
    rows = lines(out / "results.jsonl")
    log = stderr_path.read_text()
    for kill in killer.killed:
        classify(kill, errors, log)
    client = docker.from_env(timeout=60)
    left = client.containers.list(all=True, filters={"label": f"tbx.pid={proc.pid}"}, sparse=True)
    left_nets = client.networks.list(filters={"label": f"tbx.pid={proc.pid}"})
    client.close()

    summary: dict[str, Any] = {
        "attempts": len(tasks) * repeats,
        "concurrency": args.concurrency,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "cores": os.cpu_count(),
        "rows": len(rows),
        "passed": sum(bool(r["passed"]) for r in rows),
        "system_error_rows": sum(bool(r["system_error"]) for r in rows),
        "retried_tries": sum(int(r.get("retries", 0)) for r in rows),
        "error_lines": len(errors),
        "errors_by_phase": dict(Counter(str(e.get("phase")) for e in errors)),
        # retried tries by the budget they were charged to (bench.run.retries)
        "retries_charged": sum(e["retried"] and e.get("phase") not in BEFORE_THE_AGENT for e in errors),
        "retries_uncharged": sum(e["retried"] and e.get("phase") in BEFORE_THE_AGENT for e in errors),
        "cpu_hogs": args.cpu_hogs,
        "kills": killer.killed,
        "leftovers": [c.name for c in left] + [n.name for n in left_nets],
        "out": str(out),
        "stderr": str(stderr_path),
    }
    print(f"{'#':>2} {'at s':>6}  {'phase':<14} {'outcome':<30} container")
    for i, k in enumerate(killer.killed, 1):
        print(f"{i:>2} {k['at']:>6}  {k['phase']:<14} {k['outcome']:<30} {k['name']}")
        if "error" in k:
            print(f"{'':>10} {k['task']} r{k['repeat']} try {k['try']}: {k['error']}")
    by_phase: dict[str, Counter[str]] = {}
    for k in killer.killed:
        by_phase.setdefault(k["phase"], Counter())[k["outcome"]] += 1
    print("\nper phase:")
    for phase in PHASES:
        if phase in by_phase:
            print(f"  {phase:<14} {dict(by_phase[phase])}")
    print(
        f"\nrows {summary['rows']}/{summary['attempts']}, passed {summary['passed']}, "
        f"system errors left {summary['system_error_rows']}, tries retried {summary['retried_tries']} "
        f"(charged {summary['retries_charged']}, before the agent {summary['retries_uncharged']}), "
        f"errors.jsonl by phase {summary['errors_by_phase']}, leftovers {len(summary['leftovers'])}, "
        f"exit {code}, {wall:.0f} s, load {load_before[0]:.1f} -> {load_after[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"output: {out} (stderr: {stderr_path})")
    summary["ok"] = (
        summary["rows"] == summary["attempts"]
        and summary["passed"] == summary["attempts"]
        and not summary["system_error_rows"]
        and not summary["leftovers"]
    )
    return summary


if __name__ == "__main__":
    sys.exit(main())
