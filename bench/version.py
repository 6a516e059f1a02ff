"""tbx's version and the source commit it runs: `tbx --version` and the run manifest.

A wheel records the commit it was built from in build_info.json beside this file
(build_hooks.py, at wheel-build time: once installed, the source and its git history are
gone); a checkout asks git. Unknown is an answer, never an error.
"""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.source_commit import head_commit, is_modified

BUILD_INFO = Path(__file__).with_name("build_info.json")  # only in an installed wheel
CHECKOUT = Path(__file__).resolve().parents[1]


class BuildInfo(BaseModel):
    """What build_hooks.py wrote into the wheel."""

    model_config = ConfigDict(frozen=True)

    commit: str | None = None
    modified: bool = False  # built from a tree whose tracked files differed from `commit`


@functools.cache
def recorded() -> BuildInfo | None:
    """The wheel's record; None when tbx runs from a checkout (no record there)."""
    if not BUILD_INFO.is_file():
        return None
    try:
        return BuildInfo.model_validate_json(BUILD_INFO.read_bytes())
    except (OSError, ValidationError):
        return BuildInfo()  # installed, commit unknown: never git's guess from site-packages


def tbx_version() -> str:
    try:
        return version("tbx")
    except PackageNotFoundError:
        return "dev"  # a checkout on PYTHONPATH, not installed


@functools.cache
def source_commit() -> str | None:
    """The commit tbx's code comes from (the manifest's `git_commit`)."""
    info = recorded()
    return info.commit if info is not None else head_commit(CHECKOUT)


def version_line() -> str:
    """`tbx 0.1.0 (commit 1f2e..., modified)`; the commit is `unknown` when it is."""
    info = recorded()
    commit = source_commit()
    modified = info.modified if info is not None else commit is not None and is_modified(CHECKOUT)
    where = f"commit {commit}{', modified' if modified else ''}" if commit else "commit unknown"
    return f"tbx {tbx_version()} ({where})"
