"""A run's output directory: append-only result files, the lock, crash repair,
the manifest with its bundle check, and setting a superseded run aside.

  results.jsonl   one row per attempt (bench.run.results.ResultRow)
  errors.jsonl    system errors (container, endpoint or judge failures), kept out of the score
  attempts/       one AttemptRecord per attempt (what `tbx judge regrade` reads)
  states/         canonical initial and terminal states (gzip)
  trajectories/   the agent's conversation and tool calls
  manifest.json   tbx version and commit, dataset hash and provenance (bench.dataset.provenance),
                  image digests, config, the rubric judge's style, bundle hash
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.dataset import Benchmark
from bench.dataset.provenance import DATA_DIRS, dataset_provenance
from bench.defaults import POLICY_SEARCH
from bench.llm.config import ModelsConfig, rubric_style
from bench.rollout.trajectory import Trajectory
from bench.run.errors import BundleChanged, OutputLocked, OutputUnwritable
from bench.version import source_commit, tbx_version
from judge import (
    RUBRIC_STYLES,
    UNRECORDED_RUBRIC_STYLE,
    AttemptRecord,
    RubricStyle,
    State,
    canonical_bytes,
    write_attempt,
)

# policy_search changes what agents see, so results of the two searches never mix.
# dataset_provenance (git commit, tags, modified data) is not in the bundle: dataset_hash
# already covers every byte tbx reads, so the same data at another commit or tag (or a copy
# that is no checkout) grades the same, and a resume records where the data is now.
BUNDLE_KEYS = ("git_commit", "dataset_hash", "image_digests", "agent", "config", "policy_search")
SET_ASIDE = (
    "results.jsonl",
    "errors.jsonl",
    "results.jsonl.partial",
    "errors.jsonl.partial",
    "manifest.json",
    "attempts",
    "states",
    "trajectories",
)


class RunOutput:
    """Append-only result files; every line is flushed as soon as it is known,
    so a killed run leaves a consistent, resumable directory."""

    def __init__(self, out: Path):
        self.out = out
        self.make_dirs()
        self.results = out / "results.jsonl"
        self.errors = out / "errors.jsonl"
        self._lock: Any = None

    def make_dirs(self) -> None:
        for sub in ("attempts", "states", "trajectories"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)

    def lock(self) -> None:
        """One writer per output directory: a second `tbx run` on it stops at once
        (the lock goes with the process, so a killed run leaves none behind)."""
        fh = (self.out / ".lock").open("a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise OutputLocked(self.out, holder) from None
        self._lock = fh
        with writing(self.out / ".lock"):
            fh.seek(0)
            fh.truncate()
            fh.write(f"tbx run pid {os.getpid()}\n")
            fh.flush()

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def repair(self) -> list[str]:
        """Cut a last line that a kill left half-written (it would otherwise fuse with
        the next row). The cut text is kept beside the file; its attempt runs again."""
        repaired = []
        for path in (self.results, self.errors):
            if not path.exists():
                continue
            data = path.read_bytes()
            if not data or data.endswith(b"\n"):
                continue
            keep = data.rfind(b"\n") + 1
            with (path.parent / (path.name + ".partial")).open("ab") as fh:
                fh.write(data[keep:] + b"\n")
            with path.open("r+b") as fh:
                fh.truncate(keep)
            repaired.append(path.name)
        return repaired

    def done(self, retry_errors: bool) -> set[tuple[str, int]]:
        """(task, repeat) pairs that need no new attempt."""
        finished: dict[tuple[str, int], bool] = {}
        if self.results.exists():
            for line in self.results.read_text().splitlines():
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill; its attempt runs again
                finished[(row["task_id"], int(row["repeat"]))] = bool(row.get("system_error"))
        return {k for k, err in finished.items() if not (retry_errors and err)}

    def append(self, path: Path, payload: str) -> None:
        """One whole line or none: a write that fails (a full disk) is cut off
        again, so the file never ends in half a row."""
        data = (payload.rstrip("\n") + "\n").encode()
        with writing(path):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, start)  # frees what it took, even on a full disk
                    raise
            finally:
                os.close(fd)

    def write_state(self, name: str, state: State) -> str:
        rel = f"states/{name}.json.gz"
        with writing(self.out / rel):
            _replace(self.out / rel, gzip.compress(canonical_bytes(state), mtime=0))
        return "../" + rel  # relative to attempts/

    def write_effects(self, name: str, effects: Mapping[str, Any]) -> str:
        """A checkout's own servers' effects (server -> what its geteffects answered), in
        their own key order: what the attempt's test function read."""
        rel = f"states/{name}.json.gz"
        with writing(self.out / rel):
            _replace(self.out / rel, gzip.compress(json.dumps(effects).encode(), mtime=0))
        return "../" + rel  # relative to attempts/

    def write_trajectory(self, attempt_id: str, traj: Trajectory | None) -> str | None:
        if traj is None:
            return None
        rel = f"trajectories/{attempt_id}.json"
        with writing(self.out / rel):
            _replace(self.out / rel, traj.model_dump_json().encode())
        return rel

    def write_record(self, record: AttemptRecord) -> str:
        rel = f"attempts/{record.attempt_id}.json"
        with writing(self.out / rel):
            write_attempt(self.out / rel, record)
        return rel


def _replace(path: Path, data: bytes) -> None:
    """`path` holds `data` or what it held before; a failed write leaves no temporary file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """An OSError writing `path` (ENOSPC, EROFS, EIO) as OutputUnwritable: no row
    can be recorded, so the run stops instead of failing every later attempt."""
    try:
        yield
    except OSError as exc:
        raise OutputUnwritable(path, exc) from exc


def dataset_hash(root: Path | str) -> str:
    """Content hash of every file the benchmark was read from."""
    h = hashlib.sha256()
    root = Path(root)
    for sub in DATA_DIRS:
        for p in sorted((root / sub).rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def bundle_hash(manifest: dict[str, Any]) -> str:
    bundle = {k: manifest[k] for k in BUNDLE_KEYS}
    if manifest.get("harness"):  # only when on: a plain run's bundle hash is what it always was
        bundle["harness"] = list(manifest["harness"])
    if "rubric_judge" in manifest:  # absent in older manifests, whose hash stays what it was
        bundle["rubric_judge"] = manifest["rubric_judge"]
    if manifest.get("agent_script"):  # the scripted agent's calls: their digest, not the file's path
        bundle["agent_script"] = manifest["agent_script"]["sha256"]
    return hashlib.sha256(json.dumps(bundle, sort_keys=True).encode()).hexdigest()


def manifest_rubric_style(manifest: dict[str, Any] | None) -> RubricStyle:
    """The style a run's rubric questions were asked in: its manifest's `rubric_judge`,
    the json style for a manifest written before the key existed (or none at all)."""
    value = (manifest or {}).get("rubric_judge")
    return value if value in RUBRIC_STYLES else UNRECORDED_RUBRIC_STYLE


def read_manifest(out: Path) -> dict[str, Any] | None:
    """OUT/manifest.json, or None when there is none (or it is unreadable)."""
    return _previous_manifest(out)


def set_rubric_style(out: Path, style: RubricStyle) -> None:
    """Record that the run's rubric answers are now all of `style` (`tbx judge regrade
    --rejudge-rubrics` in another style): the key and the bundle hash change together,
    so a later resume in the old style cannot mix the two."""
    manifest = _previous_manifest(out)
    if manifest is None or manifest_rubric_style(manifest) == style:
        return  # unchanged (an older manifest keeps its hash)
    manifest["rubric_judge"] = style
    manifest["bundle_hash"] = bundle_hash(manifest)
    with writing(out / "manifest.json"):
        _replace(out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())


def default_run_name(agent: str, config: ModelsConfig | None) -> str:
    """The agent, and for a model agent its model (`llm gpt-4.1`): not every run is "llm"."""
    if config is None or config.agent is None or agent.split(":")[0] in ("oracle", "noop", "chaos"):
        return agent
    return f"{agent} {config.agent.model}"


def write_manifest(
    out: Path,
    bench: Benchmark,
    *,
    agent: str,
    repeats: int,
    run_name: str | None,
    images: dict[str, str],
    digests: dict[str, str],
    config: ModelsConfig | None,
    run_id: str | None = None,
    data_hash: str | None = None,
    policy_search: str = POLICY_SEARCH,
    harness: Sequence[str] = (),
    model_servers: dict[str, Any] | None = None,
    agent_script: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write manifest.json (merged with a previous one when resuming; raises
    BundleChanged when the previous results belong to another bundle). `model_servers`:
    what each role's server said of itself (`GET /models`), recorded outside the bundle.
    `agent_script`: the `scripted` agent's file (path, sha256, number of tasks), recorded
    only when given."""
    manifest: dict[str, Any] = {
        "tbx_version": tbx_version(),
        "git_commit": source_commit(),
        "dataset": str(bench.root),
        "dataset_hash": data_hash or dataset_hash(bench.root),
        # Where the data came from; a v1.0 run on data not at the pinned tag says so in `note`.
        "dataset_provenance": dataset_provenance(bench.root, bench.release).model_dump(mode="json"),
        "images": images,
        "image_digests": digests,
        "agent": agent,
        "repeats": repeats,
        "run_name": run_name or default_run_name(agent, config),
        "run_id": run_id,
        "config": config.public_dict() if config is not None else None,
        "policy_search": policy_search,
        "harness": list(harness),
        # How rubric questions are asked (judge.rubric): the judge role's style, else the default.
        "rubric_judge": rubric_style(config.judge if config is not None else None),
        "started_at": datetime.now(UTC).isoformat(),
    }
    if model_servers:
        manifest["model_servers"] = model_servers
    if agent_script is not None:
        manifest["agent_script"] = dict(agent_script)
    manifest["bundle_hash"] = bundle_hash(manifest)
    merge_previous_manifest(out, manifest)
    with writing(out / "manifest.json"):
        _replace(out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    return manifest


def set_aside(out: Path, previous: dict[str, Any]) -> Path:
    """Move a superseded run's files under OUT/superseded/<run id>/ (nothing is deleted)."""
    name = str(previous.get("run_id") or previous.get("started_at") or "previous").replace(":", "-")
    dest = out / "superseded" / name
    n = 1
    while dest.exists():
        n += 1
        dest = out / "superseded" / f"{name}-{n}"
    dest.mkdir(parents=True)
    for item in SET_ASIDE:
        if (out / item).exists():
            (out / item).rename(dest / item)
    return dest


def merge_previous_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Resuming: keep the first start time and the earlier run ids; refuse to mix
    attempts of a different bundle (code, dataset, images, agent, config) into one score."""
    previous = _previous_manifest(out)
    if previous is None:
        return
    changed = [k for k in BUNDLE_KEYS if previous.get(k) != manifest.get(k)]
    if list(previous.get("harness") or []) != list(manifest.get("harness") or []):
        changed.append("harness")
    if manifest_rubric_style(previous) != manifest_rubric_style(manifest):
        changed.append("rubric_judge")
    if _script_digest(previous) != _script_digest(manifest):
        changed.append("agent_script")
    results = out / "results.jsonl"
    if changed and results.exists() and results.stat().st_size:
        raise BundleChanged(out, changed, previous)
    manifest["started_at"] = previous.get("started_at", manifest.get("started_at"))
    manifest["resumed_at"] = datetime.now(UTC).isoformat()
    earlier = list(previous.get("previous_run_ids") or [])
    if previous.get("run_id"):
        earlier.append(previous["run_id"])
    manifest["previous_run_ids"] = earlier


def _script_digest(manifest: dict[str, Any]) -> str | None:
    entry = manifest.get("agent_script")
    return entry.get("sha256") if isinstance(entry, dict) else None


def _previous_manifest(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
