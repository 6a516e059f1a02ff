"""Typed errors of a run. Library code raises these; only the CLI turns them
into a message on stderr and an exit code (`bench.cli.main`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox import NODE_FAULT, Fault


class RunError(RuntimeError):
    """A run cannot start or go on; the message says what to do next."""

    exit_code = 1


class RunUsageError(RunError):
    """What the command was given is wrong (a malformed file, options that do not fit
    together), found before anything is written: fix the command line."""

    exit_code = 2


class OutputLocked(RunError):
    """Another process writes the output directory."""

    def __init__(self, out: Path, holder: str):
        self.out, self.holder = out, holder
        super().__init__(f"tbx run: {out} is being written by {holder}; wait for it or use another --out")


class OutputUnwritable(RunError):
    """The output directory cannot be written (a full disk, a read-only filesystem):
    the run stops, as no further attempt could be recorded either."""

    def __init__(self, path: Path, exc: OSError):
        self.path = path
        super().__init__(
            f"tbx run: cannot write {path}: {exc.strerror or exc}. The run stopped; the rows written "
            "before are intact: free space (or fix the filesystem) and run the same command to resume"
        )


class BundleChanged(RunError):
    """The output directory holds attempts of another bundle: resuming would mix
    two builds (or datasets, agents, configs) in one score."""

    def __init__(self, out: Path, changed: list[str], previous: dict[str, Any]):
        self.out, self.changed, self.previous = out, changed, previous
        super().__init__(
            f"tbx run: {out} holds results of a different bundle ({', '.join(changed)} changed); "
            "use a new --out, pass --restart-on-change to set the old results aside, or delete the directory"
        )


class NotEnoughMemory(RunError):
    """Admission (sandbox.admission) found the sets asked for do not fit in free memory."""

    fault = NODE_FAULT

    def __init__(self, reason: str):
        super().__init__(f"tbx run: {reason}")


class RubricsNeedJudge(RunError):
    fault = Fault("other", retryable=False)  # a new try has no judge either

    def __init__(self, count: int):
        super().__init__(
            f"tbx run: {count} selected task(s) have yes/no rubrics but no judge model is "
            "configured: pass --config with a `judge` role, or --skip-rubrics to judge them on state alone"
        )


class GradingError(RuntimeError):
    """An attempt cannot be graded (no terminal state, rubrics without answers or judge)."""


class NoVerdictSource(RuntimeError):
    """A task on its checkout's own servers (servers.yaml, no tbx domain) has no golden calls
    to replay: only its test function can score it (bench.run.grading.on_checkout_servers).
    Without one, or without an evaluator to run it, its attempt runs and is recorded
    (calls, trajectory, the servers' effects) but never scored."""

    fault = Fault("judge", retryable=False)
