"""`tbx up --from` (a recorded attempt brought back, its calls replayed) against
`tbx up TASK` (the task's initial state), as a user runs them: time from the command to
the moment it is ready (its `--json` line printed), per task, side by side.

Makes a run to bring back first (`tbx run --agent chaos --repeat 1` on the chosen tasks
of the demo pack), unless `--run DIR` names one. For each task, alternately, `tbx up
TASK --json` and `tbx up --from RUN TASK#0 --json` (full replay) are started, timed to
their JSON line, stopped with SIGINT and waited for (teardown not counted); the median
of `--rounds` rounds is shown. Per replayed call: the `--from` line's replay time over
its calls, and the proxy round trip of each call (`replayed[].latency_ms`, median).

Usage::

    python benchmarks/up_from.py [--tasks ID,ID] [--rounds 3] [--run DIR] [--no-typesense]

Prints a table; containers are the commands' own (`tbx up` removes them on SIGINT).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "bench" / "packs" / "demo"
TBX = str(Path(sys.executable).with_name("tbx"))
TASKS = [
    "demo_retail.py:test_ret_defective_speaker_refund",
    "demo_auto_insurance.py:test_ins_hail_damage_claim",
    "demo_consulting.py:test_con_laptop_refresh",
    "demo_travel.py:test_trv_broken_air_conditioning",
    "demo_neobank.py:test_nb_lost_phone_mfa",
]


def timed_up(argv: list[str]) -> tuple[float, dict[str, Any]]:
    """Seconds from starting `tbx up ...` to its JSON line, and the line; then SIGINT and wait."""
    t = time.monotonic()
    proc = subprocess.Popen(
        [TBX, "up", *argv, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.lstrip().startswith("{"):
                elapsed = time.monotonic() - t
                doc: dict[str, Any] = json.loads(line)
                break
        else:
            raise RuntimeError(
                f"tbx up {' '.join(argv)} printed no JSON line: {proc.stderr.read()[-2000:] if proc.stderr else ''}"
            )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    return elapsed, doc


def make_run(tasks: list[str], out: Path) -> None:
    cmd = [
        TBX,
        "run",
        "--dataset",
        str(PACK),
        "--agent",
        "chaos",
        "--repeat",
        "1",
        "--tasks",
        ",".join(tasks),
    ]
    cmd += ["--concurrency", "2", "--skip-rubrics", "--out", str(out), "--plain"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--run", type=Path, help="a run directory of these tasks (default: a new chaos run)")
    ap.add_argument("--no-typesense", action="store_true")
    args = ap.parse_args()
    tasks = [t for t in args.tasks.split(",") if t]
    extra = ["--no-typesense"] if args.no_typesense else []
    run = args.run
    if run is None:
        run = Path(tempfile.mkdtemp(prefix="tbx-up-from-")) / "chaos"
        make_run(tasks, run)
    print(
        f"run {run}; {args.rounds} rounds; load: {os.getloadavg()[0]:.2f}; typesense: {not args.no_typesense}"
    )
    header = f"{'task':<52} {'calls':>5} {'up TASK s':>10} {'up --from s':>12} {'added s':>8} {'replay s':>9} {'ms/call':>8} {'proxy ms':>9} {'match':>6}"
    print(header)
    print("-" * len(header))
    totals: dict[str, list[float]] = {"plain": [], "from": [], "calls": []}
    for task in tasks:
        plain, revived, replay, per_call, proxy_ms = [], [], [], [], []
        matched = True
        calls = 0
        for _ in range(args.rounds):
            s, _doc = timed_up([task, "--dataset", str(PACK), *extra])
            plain.append(s)
            s, doc = timed_up(["--from", str(run), f"{task}#0", *extra])
            revived.append(s)
            calls = doc["from"]["calls"]
            replay.append(doc["timings"].get("replay", 0.0))
            per_call.append(doc["timings"].get("replay", 0.0) / max(calls, 1) * 1000)
            proxy_ms += [c["latency_ms"] for c in doc["replayed"]]
            matched = matched and bool(doc["check"] and doc["check"]["matched"])
        p, f = statistics.median(plain), statistics.median(revived)
        totals["plain"].append(p)
        totals["from"].append(f)
        totals["calls"].append(calls)
        print(
            f"{task:<52} {calls:>5} {p:>10.2f} {f:>12.2f} {f - p:>+8.2f} {statistics.median(replay):>9.3f} "
            f"{statistics.median(per_call):>8.1f} {statistics.median(proxy_ms) if proxy_ms else 0:>9.1f} {'yes' if matched else 'NO':>6}"
        )
    print(
        f"{'median over tasks':<52} {statistics.median(totals['calls']):>5.0f} {statistics.median(totals['plain']):>10.2f} "
        f"{statistics.median(totals['from']):>12.2f} {statistics.median(totals['from']) - statistics.median(totals['plain']):>+8.2f}"
    )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
