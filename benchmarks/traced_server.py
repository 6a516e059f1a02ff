"""What grows in a long-running tbx server's Python heap: run it under tracemalloc and
compare snapshots (how the long haul's RSS growth was traced, docs/performance.md).

    TRACE_DIR=/tmp/trace python benchmarks/traced_server.py session-proxy --dataset ... --port ...
    kill -USR2 PID          # after a warm-up, and again after N more sessions: snap-1, snap-2
    python benchmarks/traced_server.py --compare /tmp/trace/snap-1 /tmp/trace/snap-2

Each SIGUSR2 collects garbage, then dumps a snapshot (`TRACE_FRAMES` frames per allocation,
default 12) to `$TRACE_DIR/snap-N`. `--compare` prints the allocation sites that grew most,
by line and by traceback.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from typing import Any


def compare(a_path: str, b_path: str, top: int = 20) -> None:
    skip = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib*")]
    a = tracemalloc.Snapshot.load(a_path).filter_traces(skip)
    b = tracemalloc.Snapshot.load(b_path).filter_traces(skip)
    mib = 2**20
    before = sum(s.size for s in a.statistics("filename")) / mib
    after = sum(s.size for s in b.statistics("filename")) / mib
    print(f"traced heap {before:.2f} -> {after:.2f} MiB")
    for st in b.compare_to(a, "lineno")[:top]:
        print(f"{st.size_diff / 1024:9.1f} KiB {st.count_diff:+7d}  {st.traceback[0]}")
    print("---- by traceback")
    for st in b.compare_to(a, "traceback")[:5]:
        print(f"{st.size_diff / 1024:9.1f} KiB {st.count_diff:+7d}")
        for line in st.traceback.format()[-8:]:
            print("     ", line)


def serve(args: list[str]) -> int:
    out = Path(os.environ.get("TRACE_DIR", "."))
    tracemalloc.start(int(os.environ.get("TRACE_FRAMES", "12")))
    dumped = [0]

    def dump(signum: int, frame: Any) -> None:
        gc.collect()
        dumped[0] += 1
        tracemalloc.take_snapshot().dump(str(out / f"snap-{dumped[0]}"))

    signal.signal(signal.SIGUSR2, dump)
    from bench.cli.main import main

    sys.argv = ["tbx", *args]
    return int(main() or 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(serve(sys.argv[1:]))
