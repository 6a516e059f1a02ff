"""The judge's records on disk: attempt records (RESULTS/attempts/*.json) and
canonical state files (`.json`, or `.json.gz`), each written atomically (a
killed writer leaves the old file or none, never half of one)."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from judge.canonical import State
from judge.records import AttemptRecord


def initial_state_of(record: AttemptRecord, base: Path) -> State | None:
    """The record's initial state: inline, or from its file (relative to `base`, the record's directory)."""
    if record.initial_state is not None:
        return record.initial_state
    return read_state(base, record.initial_state_path)


def terminal_state_of(record: AttemptRecord, base: Path) -> State | None:
    """The record's terminal state: inline, or from its file (relative to `base`, the record's directory)."""
    if record.terminal_state is not None:
        return record.terminal_state
    return read_state(base, record.terminal_state_path)


def read_state(base: Path, path: str | None) -> State | None:
    if path is None:
        return None
    p = Path(path)
    if not p.is_absolute():
        p = base / p
    data = p.read_bytes()
    if p.suffix == ".gz":
        data = gzip.decompress(data)
    state: State = json.loads(data)
    return state


def write_state(path: Path, state: State) -> None:
    """Write a canonical state file (gzip when the name ends in .gz), atomically."""
    data = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    atomic_write(path, data)


def read_attempt(path: Path) -> AttemptRecord:
    return AttemptRecord.model_validate_json(path.read_bytes())


def write_attempt(path: Path, record: AttemptRecord) -> None:
    atomic_write(path, record.model_dump_json(indent=1, exclude_none=False).encode())


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
