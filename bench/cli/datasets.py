"""The benchmark a command works on, checked in full before anything starts.

Every error in the data (a task whose server tbx has no domain for, a missing or
malformed seed file, an unknown scenario or release, a data patch the tables
refuse) is raised here as a :class:`DatasetError`, which `bench.cli.main` prints
one problem per line and exits 2 with: no sandbox boots, no attempt row is
written, nothing is retried as a system error.
"""

from __future__ import annotations

from pathlib import Path

from bench.dataset import Benchmark, DatasetError, default_root, load_benchmark


def benchmark_for(command: str, dataset: str | Path | None, release: str | Path | None = None) -> Benchmark:
    root = Path(dataset) if dataset else default_root()
    bench = load_benchmark(root, release=release, strict=False)
    errors = bench.errors
    if errors:
        n = len(errors)
        raise DatasetError(
            errors,
            f"{command}: {n} problem{'s' if n != 1 else ''} in the benchmark data at {root}; nothing was "
            f"started (`tbx tasks validate {root}` lists every problem and what tbx runs of each release)",
        )
    return bench
