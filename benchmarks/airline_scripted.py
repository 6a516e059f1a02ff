"""The airline release end to end with the scripted agent: for each task of
benchmarks/airline_scripts/ (calls written from the task's text and the airline policy,
checked against the checkout's own airline server), a known-good script must pass by
the task's test function and a known-bad one fail with `test_assert` at the line
expected. Two `tbx run --agent scripted` runs (good, bad) on the real checkout; prints a
table (verdict, failing line, wall per attempt, what the test function added) and exits
1 when a verdict is not the one expected.

    .venv/bin/python benchmarks/airline_scripted.py [--dataset CHECKOUT] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "benchmarks" / "airline_scripts"
RELEASE = "dataset_2604_airline_tau_bench"
# task uid -> a piece of the bad script's failing assert message (the test's own words)
BAD_FAILS = {
    "test_000_book_one_way_economy_flight": "smaller certificate should not have been used",
    "test_002_downgrade_business_to_economy": "Expected reservation.cabin == economy",
}


def run(kind: str, checkout: Path, out: Path, repeat: int) -> tuple[list[dict], float]:
    t = time.monotonic()
    cmd = [
        str(REPO / ".venv" / "bin" / "tbx"),
        "run",
        "--dataset",
        str(checkout),
        "--release",
        RELEASE,
        "--agent",
        "scripted",
        "--script",
        str(SCRIPTS / f"{kind}.json"),
        "--tasks",
        ",".join(BAD_FAILS),
        "--repeat",
        str(repeat),
        "--max-retries",
        "0",
        "--plain",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{kind}: tbx run exited {done.returncode}:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return rows, time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("TBX_CHECKOUT", str(REPO.parent / "shared/benchmarks/thinkingbox-data"))
    ap.add_argument("--dataset", default=default)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    wrong: list[str] = []
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; repeat {args.repeat}")
    print(
        "| task | script | verdict | signature | failing line | wall/attempt s | grading s | test fn s | run wall s |"
    )
    print("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="airline-scripted-") as tmp:
        for kind in ("good", "bad"):
            rows, wall = run(kind, Path(args.dataset), Path(tmp) / kind, args.repeat)
            for uid, expected in BAD_FAILS.items():
                mine = [r for r in rows if r["task_id"].endswith(":" + uid)]
                for r in mine:
                    if r.get("system_error"):
                        wrong.append(f"{uid} {kind}: system error {r.get('error')}")
                    elif kind == "good" and not r["passed"]:
                        wrong.append(
                            f"{uid} good: failed at line {r.get('test_line')}: {r.get('test_message')}"
                        )
                    elif kind == "bad" and (
                        r["passed"]
                        or r["signature"] != "test_assert"
                        or expected not in r.get("test_message", "")
                    ):
                        wrong.append(f"{uid} bad: {r['signature']} {r.get('test_message')!r}")
                if len(mine) != args.repeat:
                    wrong.append(f"{uid} {kind}: {len(mine)} rows, expected {args.repeat}")
                if not mine:
                    continue
                walls = [sum(r["timings"].values()) for r in mine]
                judge = [r["timings"].get("judge", 0.0) for r in mine]  # grading: the evaluator's run
                inside = [r.get("test_seconds", 0.0) for r in mine]  # the function's own time in it
                verdicts = ",".join("pass" if r["passed"] else "fail" for r in mine)
                line = mine[0].get("test_line")
                print(
                    f"| {uid} | {kind} | {verdicts} | {mine[0]['signature'] or '-'} | {line or '-'} "
                    f"| {statistics.median(walls):.2f} | {statistics.median(judge):.2f} "
                    f"| {statistics.median(inside):.3f} | {wall:.1f} |"
                )
    for w in wrong:
        print("UNEXPECTED:", w, file=sys.stderr)
    print("all verdicts as expected" if not wrong else f"{len(wrong)} unexpected")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
