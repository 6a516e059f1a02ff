"""Soak: many attempts under faults (issue #17), with the end checks printed.

Two `tbx run`s side by side on the demo pack, an oracle one and a chaos one
(the attempts split between them, the concurrency too), while a chaos thread
kills a random attempt container (server, PostgreSQL or Typesense) every
--kill-every seconds and, once, restarts the Docker daemon. The daemon is a
second one of our own (scripts/second-dockerd.sh): the shared daemon is never
restarted; with --daemon shared (no restart) the soak runs on the shared one
and kills only its own runs' containers.

At the end it checks and prints:
  - every (task, repeat) exactly once in each run's results.jsonl;
  - every killed attempt ended in a system error that was retried (an error
    line marked `retried`), or, when the kill landed after its terminal state
    was dumped, in a graded row (counted separately, never as a failure);
  - the oracle's rows all passed (its killed tries were retried);
  - 0 tbx containers and 0 tbx networks left on the daemon;
  - the tbx processes' RSS over time (sampled), and its growth.

    python benchmarks/soak.py                          # 1000 attempts, concurrency 16, one restart
    python benchmarks/soak.py --attempts 240 --concurrency 12
    python benchmarks/soak.py --attempts 24 --concurrency 4 --daemon shared --no-restart --kills 1

Exit status 0 when every check holds; the summary is also written as JSON (--json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import docker  # noqa: E402
from second_daemon import SecondDaemon, rows_by_key  # noqa: E402

PACK = REPO / "bench" / "packs" / "demo"
ROLES = ("server", "postgres", "typesense")


def demo_tasks() -> list[str]:
    from bench.dataset import load_benchmark

    bench = load_benchmark(PACK, strict=False)
    return [t.id for t in bench.tasks if not t.has_rubrics]


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def attempt_of(label: str) -> str:
    """The attempt id of a set's `tbx.attempt` label: a set that replaced one lost before
    it was used (sandbox.checkout) is named after the attempt's, one id further."""
    return re.sub(r"^(.*-r\d+-[0-9a-f]{12})(-[0-9a-f]{12})+$", r"\1", label)


MISS_GRACE = 20.0  # seconds for a killed attempt's error line to appear
MAX_KILLS_FACTOR = 3


class Chaos(threading.Thread):
    """Kills a random running attempt container of `pids` every `every` seconds
    (at most `kills`), and restarts `daemon` once when `restart_at()` says so."""

    def __init__(
        self,
        client_for: Any,
        pids: list[int],
        every: float,
        kills: int | None,
        daemon: SecondDaemon | None,
        restart_at: Any,
        errored: Any = None,
    ):
        super().__init__(daemon=True)
        # attempt ids with an errors.jsonl line so far: a kill whose attempt has none
        # after a grace struck a set no attempt was using (in teardown) and is not counted
        self.errored = errored
        self.client_for = client_for
        self.pids = {str(p) for p in pids}
        self.every, self.kills = every, kills
        self.daemon_ = daemon
        self.restart_at = restart_at
        self.killed: list[dict[str, Any]] = []
        self.restarted: float | None = None
        self.restart_seconds: float | None = None
        self.stop = threading.Event()
        self.rng = random.Random(17)

    def victims(self) -> list[Any]:
        client = self.client_for()
        try:
            running = client.containers.list(
                filters={"label": "tbx.attempt", "status": "running"}, ignore_removed=True
            )
        finally:
            client.close()
        return [
            c
            for c in running
            if c.labels.get("tbx.pid") in self.pids and c.labels.get("tbx.role", "").split("-")[0] in ROLES
        ]

    def allowed_kills(self) -> int:
        """`kills`, plus one for each kill that missed: its attempt wrote no error line
        within MISS_GRACE (the kill struck a set in teardown, after the terminal dump),
        up to MAX_KILLS_FACTOR x `kills`. So `--kills N` means N kills under attempts in
        flight whenever the runs give the chance, whatever the timing of boots."""
        assert self.kills is not None
        if self.errored is None:
            return self.kills
        errored = self.errored()
        now = time.monotonic()
        missed = sum(
            1 for k in self.killed if k["attempt"] not in errored and now - float(k["at"]) > MISS_GRACE
        )
        return min(self.kills + missed, self.kills * MAX_KILLS_FACTOR)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                if self.daemon_ is not None and self.restarted is None and self.restart_at():
                    t = time.monotonic()
                    self.restarted = time.time()
                    self.daemon_.restart(down_for=3.0)
                    self.restart_seconds = time.monotonic() - t
                    continue
                if self.kills is not None and len(self.killed) >= self.allowed_kills():
                    continue
                victims = self.victims()
                if not victims:
                    continue
                c = self.rng.choice(victims)
                c.kill()
                self.killed.append(
                    {
                        "attempt": attempt_of(c.labels["tbx.attempt"]),
                        "role": c.labels.get("tbx.role", ""),
                        "pid": c.labels["tbx.pid"],
                        "at": time.monotonic(),
                    }
                )
            except Exception as exc:
                # The daemon restarting, a container gone in the meantime: try again next tick.
                print(f"chaos: {exc.__class__.__name__}: {str(exc)[:160]}", file=sys.stderr)


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16, help="attempts at once, over both runs")
    ap.add_argument("--chaos-share", type=float, default=0.5, help="share of attempts run by the chaos agent")
    ap.add_argument("--kill-every", type=float, default=5.0, help="seconds between container kills")
    ap.add_argument(
        "--kills",
        type=int,
        default=None,
        help="stop after this many kills under attempts in flight; a kill that struck a set in "
        "teardown does not count, up to 3x as many kills in all (default: no limit)",
    )
    ap.add_argument("--no-restart", action="store_true", help="no daemon restart")
    ap.add_argument(
        "--restart-after", type=float, default=0.3, help="restart once this share of rows is written"
    )
    ap.add_argument("--daemon", choices=["second", "shared"], default="second")
    ap.add_argument("--max-retries", type=int, default=2)
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        help="warm sandboxes per domain and run (tbx run --warm; 0: cold, the 90 s boot deadline)",
    )
    ap.add_argument(
        "--tasks", type=int, default=None, help="only the first N demo tasks (default: all without rubrics)"
    )
    ap.add_argument("--out", type=Path, default=Path("/tmp/tbx-soak"))
    ap.add_argument("--json", type=Path, default=None, help="write the summary here too")
    ap.add_argument("--timeout", type=float, default=6 * 3600)
    args = ap.parse_args()

    tasks = demo_tasks()[: args.tasks]
    n_chaos = round(args.attempts * args.chaos_share)
    plan = {"oracle": args.attempts - n_chaos, "chaos": n_chaos}
    plan = {agent: n for agent, n in plan.items() if n > 0}
    env = {**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true", "PYTHONPATH": str(REPO)}
    d2: SecondDaemon | None = None
    if args.daemon == "second":
        reason = SecondDaemon.unavailable()
        if reason:
            print(f"soak: needs a second Docker daemon: {reason}", file=sys.stderr)
            return 2
        d2 = SecondDaemon()
        d2.start()
        env = {**d2.env(), "PYTHONPATH": str(REPO)}

    def client_for() -> docker.DockerClient:
        return d2.client() if d2 is not None else docker.from_env(timeout=60)

    args.out.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen[str]] = {}
    outs: dict[str, Path] = {}
    expected: dict[str, set[tuple[str, int]]] = {}
    share = {a: max(1, round(args.concurrency * n / args.attempts)) for a, n in plan.items()}
    for agent, n in plan.items():
        repeats = math.ceil(n / len(tasks))
        # n attempts: all tasks `repeats` times would overshoot; the first tasks get one more.
        chosen = tasks if n >= len(tasks) else tasks[:n]
        repeats = math.ceil(n / len(chosen))
        out = args.out / agent
        outs[agent] = out
        expected[agent] = {(t, r) for t in chosen for r in range(repeats)}
        cmd = [sys.executable, "-m", "bench.cli", "run", "--dataset", str(PACK), "--tasks", ",".join(chosen)]
        cmd += ["--agent", agent if agent == "oracle" else "chaos:0.5", "--repeat", str(repeats)]
        cmd += ["--concurrency", str(share[agent]), "--warm", str(args.warm), "--out", str(out), "--plain"]
        cmd += ["--max-retries", str(args.max_retries), "--golden-cache", str(args.out / "golden")]
        log = (args.out / f"{agent}.stderr").open("w")
        procs[agent] = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
    total = sum(len(e) for e in expected.values())
    print(
        f"soak: {total} attempts ({', '.join(f'{a} {len(e)}' for a, e in expected.items())}), "
        f"concurrency {sum(share.values())}, daemon {args.daemon}, restart {not args.no_restart}",
        file=sys.stderr,
    )

    def rows_written() -> int:
        return sum(sum(rows_by_key(outs[a] / "results.jsonl").values()) for a in outs)

    restart_rows = math.ceil(total * args.restart_after)
    chaos = Chaos(
        client_for,
        [p.pid for p in procs.values()],
        args.kill_every,
        args.kills,
        None if args.no_restart else d2,
        lambda: rows_written() >= restart_rows,
        lambda: {line["attempt_id"] for a in outs for line in lines(outs[a] / "errors.jsonl")},
    )
    t0 = time.monotonic()
    rss: list[tuple[float, dict[str, int]]] = []
    started_chaos = False
    while any(p.poll() is None for p in procs.values()):
        if time.monotonic() - t0 > args.timeout:
            for p in procs.values():
                p.kill()
            break
        # Kills start once attempts run (the golden replays come first).
        if not started_chaos and rows_written() > 0:
            chaos.start()
            started_chaos = True
        sample = {a: r for a, p in procs.items() if (r := rss_kib(p.pid)) is not None}
        rss.append((time.monotonic() - t0, sample))
        time.sleep(5)
    chaos.stop.set()
    wall = time.monotonic() - t0
    if d2 is not None:
        d2.start()  # in case the restart was under way when the runs ended

    # ---- checks
    checks: dict[str, bool] = {}
    details: dict[str, Any] = {"exit_codes": {a: p.returncode for a, p in procs.items()}}
    killed_ids = {k["attempt"] for k in chaos.killed}
    errors: dict[str, dict[str, Any]] = {}
    graded_ids: dict[str, dict[str, Any]] = {}
    for agent, out in outs.items():
        keys = rows_by_key(out / "results.jsonl")
        checks[f"{agent}: every (task, repeat) exactly once"] = keys == Counter(
            {k: 1 for k in expected[agent]}
        )
        details[f"{agent}_rows"] = sum(keys.values())
        for line in lines(out / "errors.jsonl"):
            errors[line["attempt_id"]] = line
        for row in lines(out / "results.jsonl"):
            graded_ids[row["attempt_id"]] = row
    # A killed try ends as a system error: a `retried` line while retries are left, else
    # the (task, repeat)'s system-error row. A kill that landed after the terminal state was
    # dumped (teardown) changes nothing: that try is graded as usual.
    retried = [a for a in killed_ids if a in errors and errors[a].get("retried")]
    final_error = [a for a in killed_ids if a in errors and not errors[a].get("retried")]
    after_end = [a for a in killed_ids if a in graded_ids and not graded_ids[a]["system_error"]]
    unaccounted = [a for a in killed_ids if a not in errors and a not in graded_ids]
    retries_left = [a for a in final_error if errors[a].get("try", 0) <= args.max_retries]
    checks["every killed try: a system error, retried while retries were left"] = (
        not unaccounted and not retries_left
    )
    details.update(
        killed=len(killed_ids),
        killed_retried=len(retried),
        killed_out_of_retries=len(final_error),
        killed_after_end=len(after_end),
        killed_unaccounted=sorted(unaccounted),
        killed_not_retried_with_retries_left=sorted(retries_left),
        kills=chaos.killed,
    )
    oracle_rows = lines(outs["oracle"] / "results.jsonl") if "oracle" in outs else []
    # Not killed in its final try: the oracle must pass (a system error row there would be
    # a fault tbx did not absorb; one whose last try was killed ran out of retries).
    oracle_failed = [
        r["attempt_id"] for r in oracle_rows if not r["passed"] and r["attempt_id"] not in killed_ids
    ]
    checks["oracle: every row whose last try was not killed passed"] = not oracle_failed
    details["oracle_not_passed"] = oracle_failed[:20]
    details["oracle_out_of_retries_by_kills"] = sum(r["attempt_id"] in killed_ids for r in oracle_rows)
    all_rows = [r for o in outs.values() for r in lines(o / "results.jsonl")]
    details["system_error_rows"] = sum(r["system_error"] for r in all_rows)
    details["retried_tries"] = sum(r.get("retries", 0) for r in all_rows)
    if d2 is not None:  # the daemon is ours alone: anything on it, labelled or not, is a leak
        left_c, left_n = d2.anything_left()
    else:  # the shared daemon: what carries the soak's runs' pids
        client = client_for()
        try:
            pids = {str(p.pid) for p in procs.values()}
            left_c = [
                c.name
                for c in client.containers.list(all=True, filters={"label": "tbx.run"}, ignore_removed=True)
                if c.labels.get("tbx.pid") in pids
            ]
            left_n = [
                n.name
                for n in client.networks.list(filters={"label": "tbx.run"})
                if (n.attrs.get("Labels") or {}).get("tbx.pid") in pids
            ]
        finally:
            client.close()
    checks["0 containers and 0 networks left"] = not left_c and not left_n
    details["left"] = {"containers": left_c, "networks": left_n}
    # Exit 3 means "some rows are system errors"; fine when every such row's last try was killed.
    unexplained = [
        r["attempt_id"] for r in all_rows if r["system_error"] and r["attempt_id"] not in killed_ids
    ]
    details["system_error_rows_not_from_kills"] = unexplained[:20]
    checks["runs exited 0 (or 3 with every system-error row's last try killed)"] = not unexplained and all(
        p.returncode in (0, 3) for p in procs.values()
    )

    # ---- RSS over time: first and last quarter medians per run
    rss_report: dict[str, Any] = {}
    for agent in procs:
        series = [(t, s[agent]) for t, s in rss if agent in s]
        if len(series) >= 4:
            q = max(1, len(series) // 4)
            head = sorted(v for _, v in series[:q])[q // 2]
            tail = sorted(v for _, v in series[-q:])[q // 2]
            rss_report[agent] = {
                "samples": len(series),
                "first_mib": round(series[0][1] / 1024, 1),
                "max_mib": round(max(v for _, v in series) / 1024, 1),
                "first_quarter_median_mib": round(head / 1024, 1),
                "last_quarter_median_mib": round(tail / 1024, 1),
                "growth": round(tail / head, 3),
                "every_minute_mib": [round(v / 1024, 1) for t, v in series[:: max(1, 12)]],
            }
    summary = {
        "attempts": total,
        "concurrency": sum(share.values()),
        "wall_seconds": round(wall, 1),
        "attempts_per_minute": round(60 * len(all_rows) / wall, 2) if wall else None,
        "kills": len(chaos.killed),
        "daemon_restarted": chaos.restarted is not None,
        "restart_seconds": round(chaos.restart_seconds, 1) if chaos.restart_seconds else None,
        "load_avg_at_end": os.getloadavg(),
        "checks": checks,
        "details": details,
        "rss": rss_report,
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    ok = all(checks.values())
    for name, good in checks.items():
        print(f"{'PASS' if good else 'FAIL'}  {name}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
