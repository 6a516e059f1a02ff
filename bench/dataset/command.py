"""``tbx tasks validate DIR``: print every problem, then a one-line summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from .loader import load_benchmark


def validate_command(dataset: Path, *, release: str | None = None, out: TextIO | None = None) -> int:
    """Print problems one per line (``path: task: field: message``) and a summary line.

    Returns 0 when there are no errors (warnings are printed but allowed), else 1.
    """
    stream = out if out is not None else sys.stdout
    bench = load_benchmark(dataset, release=release, strict=False)
    for problem in bench.problems:
        print(problem, file=stream)
    errors = len(bench.errors)
    warnings = len(bench.problems) - errors
    if errors:
        status = f"{errors} error{'s' if errors != 1 else ''}"
        if warnings:
            status += f", {warnings} warning{'s' if warnings != 1 else ''}"
        status = f"FAILED ({status}; {len(bench.tasks)} usable tasks)"
    else:
        status = "OK" if not warnings else f"OK ({warnings} warning{'s' if warnings != 1 else ''})"
    print(f"{bench.summary()}: {status}", file=stream)
    return 1 if errors else 0
