"""What running the benchmark through Inspect costs: the same attempts through
`inspect eval tbx/thinkingbox_bench` and `tbx run`, side by side in one run.

    python benchmarks/inspect_overhead.py [--tasks N] [--repeat K] [--concurrency C] [--warm W] [--rounds R]

Both play each task's golden calls and end: `tbx run --agent oracle` with its built-in
agent; Inspect with `mockllm` scripted to the same calls (tests/integration/tbx/mock_eval.py,
in its own process, as a user's eval), `--epochs K`, `--max-samples C`, the same warm pool
size per domain. Every attempt must pass in both (a wrong end state is not a cost). Each
series is one process, timed from its start to its exit: wall per attempt, and the CPU the
process and its children spent (user + sys; the containers' CPU, the same sandboxes in
both, is Docker's and not in it) per attempt. Golden end states come from the shared cache
(a first round fills it). The ratio Inspect / tbx run is the figure: goal within 1.2x.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "bench" / "packs" / "demo"
BIN = Path(sys.executable).parent
MOCK_EVAL = REPO / "tests" / "integration" / "tbx" / "mock_eval.py"

sys.path.insert(0, str(REPO))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its children, stdout)."""
    cpu0, t0 = _children_cpu(), time.monotonic()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=3600)
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{args[:3]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, cpu, done.stdout


def tbx_run(tasks: list[str], k: int, c: int, w: int, out: Path) -> tuple[float, float, int]:
    args = [str(BIN / "tbx"), "run", "--dataset", str(DEMO), "--tasks", ",".join(tasks), "--agent", "oracle"]
    args += ["--repeat", str(k), "--concurrency", str(c), "--warm", str(w), "--skip-rubrics", "--plain"]
    wall, cpu, _ = timed([*args, "--out", str(out)], REPO)
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    assert all(r["passed"] for r in rows), [r["task_id"] for r in rows if not r["passed"]]
    return wall, cpu, len(rows)


def inspect_eval(tasks: list[str], k: int, c: int, w: int, logs: Path) -> tuple[float, float, int]:
    from inspect_ai.log import read_eval_log

    args = [sys.executable, str(MOCK_EVAL), "golden", str(logs), str(DEMO), ",".join(tasks)]
    args += ["--epochs", str(k), "--max-samples", str(c), "--warm", str(w), "--skip-rubrics"]
    # cwd outside the checkout: Inspect reads `tbx/...` as a path where a tbx/ is
    wall, cpu, stdout = timed(args, logs.parent)
    log = read_eval_log(stdout.strip().splitlines()[-1])
    samples = log.samples or []
    failed = [
        (s.id, s.error or (s.scores and s.scores["end_state"].explanation))
        for s in samples
        if not (s.scores and s.scores["end_state"].value == 1.0)
    ]
    assert not failed, failed
    return wall, cpu, len(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=15, help="the demo pack's first N tasks")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--warm", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    a = parser.parse_args()
    from bench.dataset import load_benchmark

    tasks = [t.id for t in load_benchmark(DEMO).tasks[: a.tasks]]
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(
        f"{len(tasks)} tasks x {a.repeat}, concurrency {a.concurrency}, warm {a.warm}; load {' '.join(load)}"
    )
    series: dict[str, list[tuple[float, float, int]]] = {"tbx run": [], "inspect eval": []}
    with tempfile.TemporaryDirectory(prefix="tbx-inspect-bench-") as tmp:
        for r in range(a.rounds):
            series["tbx run"].append(tbx_run(tasks, a.repeat, a.concurrency, a.warm, Path(tmp) / f"run{r}"))
            logs = Path(tmp) / f"inspect{r}" / "logs"
            logs.parent.mkdir()
            series["inspect eval"].append(inspect_eval(tasks, a.repeat, a.concurrency, a.warm, logs))
    print(f"{'':14}{'attempts':>9}{'wall s':>9}{'wall/att':>10}{'CPU s':>9}{'CPU/att':>9}")
    per: dict[str, tuple[float, float]] = {}
    for name, runs in series.items():
        n = sum(x[2] for x in runs)
        wall, cpu = sum(x[0] for x in runs), sum(x[1] for x in runs)
        per[name] = (wall / n, cpu / n)
        print(f"{name:14}{n:>9}{wall:>9.1f}{wall / n:>10.2f}{cpu:>9.1f}{cpu / n:>9.2f}")
    (tw, tc), (iw, ic) = per["tbx run"], per["inspect eval"]
    print(
        f"{'ratio':14}{'':>9}{'':>9}{iw / tw:>9.2f}x{'':>9}{ic / tc:>8.2f}x   (inspect eval / tbx run; goal <= 1.2x)"
    )
    # What each process spends once, before its first attempt: its imports.
    imports = {
        "tbx run": [str(BIN / "tbx"), "run", "--help"],
        "inspect eval": [
            sys.executable,
            "-c",
            "import inspect_ai.model, tbx._registry; from inspect_ai import eval",
        ],
    }
    fixed = {name: timed(args, REPO)[1] for name, args in imports.items()}
    n = sum(x[2] for x in series["tbx run"])
    beyond = {name: per[name][1] - fixed[name] * a.rounds / n for name in per}
    print(
        f"start-up CPU (imports): tbx run {fixed['tbx run']:.1f} s, inspect eval {fixed['inspect eval']:.1f} s; "
        f"CPU/att beyond it: tbx run {beyond['tbx run']:.2f} s, inspect eval {beyond['inspect eval']:.2f} s, "
        f"ratio {beyond['inspect eval'] / beyond['tbx run']:.2f}x"
    )


if __name__ == "__main__":
    main()
