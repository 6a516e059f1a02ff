"""The commit a tbx source tree is at, read with git; None when the tree is not a git
checkout or git does not answer, never an error.

Standard library only: build_hooks.py loads this file while a wheel is built (to record
the commit in the wheel), before any of tbx's dependencies is installed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def head_commit(root: Path) -> str | None:
    """The commit checked out at `root`. Only a checkout rooted there counts: an installed
    tbx inside some project's repository must not report that project's commit."""
    if not (root / ".git").exists():  # a directory, or a file in a worktree
        return None
    return _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}") or None


def is_modified(root: Path) -> bool:
    """Whether tracked files at `root` differ from its commit (False when git cannot tell)."""
    return bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
