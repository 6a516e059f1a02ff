"""`tbx run --out` on a filesystem that fills up mid-run (a small tmpfs).

Once the first row is on disk, the rest of the filesystem is filled. The run
must stop at its next write with an error naming the path (a full disk is a
system problem: no attempt is scored or written as a system error for it, and
the run does not go on through the attempts left), leave the rows written
before intact with no half line, remove its containers, and the same command
after space is freed must finish the run with every (task, repeat) once.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import DEMO_PACK

from bench.run.results import read_rows
from sandbox import leftovers

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

TASK = "demo_retail.py:test_ret_expedite_headphones"
REPEATS = 4


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True
    )
    assert mounted.returncode == 0, f"this test mounts a tmpfs (needs root): {mounted.stderr.decode()}"
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write a ballast file until the filesystem refuses."""
    ballast = disk / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        block = b"\0" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return ballast
    finally:
        os.close(fd)


def test_full_disk_stops_the_run_cleanly_and_a_resume_completes_it(small_disk: Path, tmp_path: Path) -> None:
    out = small_disk / "run"
    results = out / "results.jsonl"
    args = [sys.executable, "-m", "bench.cli", "run", "--dataset", str(DEMO_PACK), "--tasks", TASK]
    args += ["--agent", "oracle", "--repeat", str(REPEATS), "--concurrency", "1", "--warm", "0"]
    args += ["--skip-rubrics", "--plain", "--out", str(out), "--golden-cache", str(tmp_path / "golden")]

    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 480
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_text().count("\n") >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, f"the run ended before the disk filled: {proc.communicate()[1]}"
        ballast = fill(small_disk)
        _, stderr = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()

    assert proc.returncode == 1, stderr
    assert f"cannot write {out}/" in stderr and "No space left on device" in stderr, stderr
    assert "run the same command to resume" in stderr
    run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    assert leftovers(run_id) == ([], [])
    data = results.read_bytes()
    assert data.endswith(b"\n"), "no half-written row"
    before = read_rows(results)
    assert 1 <= len(before) < REPEATS, "the run stopped instead of going through every attempt"
    # The full disk is nobody's failure: no attempt was scored or written as an error for it.
    assert all(r.passed or r.system_error for r in before), [(r.signature, r.error) for r in before]
    assert not any("No space" in (r.error or "") for r in before), [r.error for r in before]
    errors = out / "errors.jsonl"
    assert not errors.exists() or "No space" not in errors.read_text()

    ballast.unlink()
    resumed = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    rows = read_rows(results)
    assert sorted(r.repeat for r in rows) == list(range(REPEATS)), "each (task, repeat) exactly once"
    assert all(r.passed for r in rows if not r.system_error), [(r.signature, r.error) for r in rows]
    assert results.read_bytes().startswith(data), "the rows written before the disk filled are untouched"
