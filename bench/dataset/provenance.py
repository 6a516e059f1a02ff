"""Where a benchmark directory's data came from, for the run manifest.

A ``thinkingbox-data`` checkout records its commit, the tags on that commit and
whether the data tbx reads differs from it; any other directory (the data-only
export, the demo pack, a copy) is "not a git checkout". A run on the v1.0 release
from data that is not at the pinned commit carries a note saying so: the write-up
gates canonical runs on pinned data (``tbx report`` shows the note). The data-only export
names its source in its README, which tbx cannot check: a v1.0 run on it is noted too.

Git is read with the ``git`` CLI, a few seconds at most, and never fails a run:
git missing, a timeout or a repository git refuses to read is recorded as such.
Nothing in the checkout is run: git's own config may not start helpers here
(fsmonitor off), and a repository owned by another user stays refused
(git's ``safe.directory``), as it is for the user's own git commands.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .loader import DEFAULT_RELEASE

# What tbx reads of a benchmark directory (bench.run.output.dataset_hash hashes these):
# a change anywhere else in a checkout (its README, CI files) is not a change of the data.
DATA_DIRS = ("dataset", "releases", "servers")
NOT_A_CHECKOUT = "not a git checkout"
GIT_TIMEOUT = 5.0  # seconds per git command


class Pin(BaseModel):
    """The data a release's canonical runs use: its release list, tag and commit."""

    model_config = ConfigDict(frozen=True)

    release: str  # the release list's file name
    tag: str
    commit: str


# The one home of the v1.0 pin (the benchmark's instructions: check out this tag).
# The commit decides: a tag is a name a clone may lack or a user may move.
V1_PIN = Pin(
    release=DEFAULT_RELEASE,
    tag="thinkingbox-bench-v1.0",
    commit="fcaba4c1a9debec42fda7f15bf29fe6d6b46c431",
)
PINS = (V1_PIN,)


class GitState(BaseModel):
    """What git says of a directory. ``checkout`` false: not a git checkout (the rest
    None); ``error`` set: a checkout git could not read (the rest None)."""

    model_config = ConfigDict(frozen=True)

    checkout: bool
    commit: str | None = None
    tags: list[str] = []
    dirty: bool | None = None  # the data (DATA_DIRS) differs from the commit
    error: str | None = None

    def summary(self) -> str:
        """One line: ``git <commit> (tag <t>)``, ``... (no tag), modified``, or why not."""
        if not self.checkout:
            return NOT_A_CHECKOUT
        if self.error is not None or self.commit is None:
            return f"git checkout git could not read ({self.error or 'no commit'})"
        tags = f"tag {', '.join(self.tags)}" if self.tags else "no tag"
        return f"git {self.commit[:12]} ({tags})" + (", data modified" if self.dirty else "")


class DatasetProvenance(BaseModel):
    """manifest.json's ``dataset_provenance``. ``pinned`` and ``note`` are judged when the
    manifest is written, against the pin of that tbx, and read back as recorded: None
    when the release has no pin (the demo pack); ``note`` set when ``pinned`` is false."""

    git: str  # GitState.summary()
    commit: str | None
    tags: list[str]
    dirty: bool | None
    release: str | None
    pinned: bool | None
    note: str | None


def _git(root: Path, *args: str) -> str:
    """stdout of one git command in `root`; raises OSError, SubprocessError or
    CalledProcessError (stderr kept)."""
    # A GIT_DIR or GIT_WORK_TREE in tbx's own environment (a hook, a script) would point git
    # at another repository; LC_ALL=C keeps git's messages the same everywhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {"LC_ALL": "C"}
    return subprocess.run(
        ["git", "-c", "core.fsmonitor=false", "--no-optional-locks", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        check=True,
        env=env,
        stdin=subprocess.DEVNULL,
    ).stdout


def git_state(root: Path | str) -> GitState:
    """The git state of a benchmark directory. Only a directory that is itself the top of
    a repository is a checkout: the demo pack inside tbx's own repository is not."""
    root = Path(root)
    if not (root / ".git").exists():
        return GitState(checkout=False)
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").strip()
        tags = sorted(_git(root, "tag", "--points-at", commit).split())
        changes = _git(root, "status", "--porcelain", "--", *DATA_DIRS)
    except FileNotFoundError:
        return GitState(checkout=True, error="git not found")
    except subprocess.TimeoutExpired:
        return GitState(checkout=True, error=f"git took over {GIT_TIMEOUT:g} s")
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or "").strip().splitlines()
        reason = lines[0].removeprefix("fatal: ").removeprefix("error: ") if lines else "no commit"
        return GitState(checkout=True, error=reason)
    except (OSError, subprocess.SubprocessError) as exc:
        return GitState(checkout=True, error=str(exc) or type(exc).__name__)
    return GitState(checkout=True, commit=commit, tags=tags, dirty=bool(changes.strip()))


def pin_of(release: str | None, pins: tuple[Pin, ...] = PINS) -> Pin | None:
    """The pin of a release (a release list's path or file name), if it has one."""
    name = Path(release).name if release else None
    return next((p for p in pins if p.release == name), None)


def unpinned_reason(state: GitState, pin: Pin) -> str | None:
    """Why the data is not `pin`'s, or None when it is (the pinned commit, data unmodified)."""
    if not state.checkout:
        return NOT_A_CHECKOUT
    if state.commit is None:
        return state.summary()
    if state.commit != pin.commit:
        return f"at another commit: {state.summary()}"
    if state.dirty:
        return f"at the pinned commit with its data modified ({', '.join(d + '/' for d in DATA_DIRS)})"
    return None


def dataset_provenance(
    root: Path | str, release: str | None, pins: tuple[Pin, ...] | None = None
) -> DatasetProvenance:
    """The manifest's record of where a run's data came from (`release`: Benchmark.release)."""
    state = git_state(root)
    pin = pin_of(release, PINS if pins is None else pins)
    reason = unpinned_reason(state, pin) if pin is not None else None
    return DatasetProvenance(
        git=state.summary(),
        commit=state.commit,
        tags=state.tags,
        dirty=state.dirty,
        release=release,
        pinned=None if pin is None else reason is None,
        note=(
            None
            if pin is None or reason is None
            else f"data not pinned: canonical runs of release {pin.release} use tag {pin.tag} "
            f"(commit {pin.commit[:12]}); this dataset is {reason}"
        ),
    )
