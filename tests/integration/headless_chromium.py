"""A headless Chromium for the HTML tests (report, compare, view): found as Debian's
`chromium` package (apt-get install chromium) or the binary named by $TBX_CHROMIUM,
failing the test without one; run with a profile of the test's own; and the size of
a screenshot it wrote."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str:
    found = os.environ.get("TBX_CHROMIUM") or next(filter(None, map(shutil.which, NAMES)), None)
    if not found:
        pytest.fail(
            "no headless Chromium found (looked for $TBX_CHROMIUM, " + ", ".join(NAMES) + "): "
            "install Debian's package with `apt-get install chromium`"
        )
    return found


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",  # tests may run as root
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}"
    return proc


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
