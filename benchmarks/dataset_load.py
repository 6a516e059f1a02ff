"""How long loading a benchmark takes (what every command pays before it starts),
for a thinkingbox-data checkout and the export, in this tree and in a base tree side by
side (one run, interleaved rounds).

    python benchmarks/dataset_load.py [--base REV] [--rounds 5] [DATASET ...]

The base tree is a temporary `git worktree` of REV, loaded in a child process with that
tree first on sys.path, so both trees read the same files on the same machine state.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "benchmarks"
DEFAULTS = [SHARED / "thinkingbox-data", SHARED / "thinkingbox-bench-v1"]

_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bench.dataset import load_benchmark
t = time.perf_counter()
bench = load_benchmark(sys.argv[2], strict=False)
print(json.dumps({"seconds": time.perf_counter() - t, "tasks": len(bench.tasks), "errors": len(bench.errors),
                  "from": __import__("bench").__file__}))
"""


def _load(tree: Path, dataset: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree), str(dataset)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(result["from"]).startswith(str(tree)):
        raise SystemExit(f"{tree}: bench was imported from {result['from']}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("datasets", nargs="*", type=Path, default=DEFAULTS)
    ap.add_argument("--base", help="a git revision to compare with (default: none)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    trees = {"current": REPO}
    with tempfile.TemporaryDirectory() as tmp:
        if args.base:
            base = Path(tmp) / "base"
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(base), args.base],
                check=True,
            )
            trees = {"base": base, **trees}
        try:
            print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds, interleaved")
            for dataset in args.datasets:
                times: dict[str, list[float]] = {name: [] for name in trees}
                counts: dict[str, tuple[float, float]] = {}
                for _ in range(args.rounds):
                    for name, tree in trees.items():
                        r = _load(tree, dataset)
                        times[name].append(r["seconds"])
                        counts[name] = (r["tasks"], r["errors"])
                cells = [
                    f"{name} {statistics.median(ts):.2f} s (tasks {counts[name][0]:.0f}, errors {counts[name][1]:.0f})"
                    for name, ts in times.items()
                ]
                ratio = ""
                if "base" in times:
                    ratio = f"  ratio {statistics.median(times['current']) / statistics.median(times['base']):.2f}"
                print(f"{dataset.name}: " + " | ".join(cells) + ratio)
        finally:
            if args.base:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False
                )


if __name__ == "__main__":
    main()
