"""A system error's cause and retryability come from its type (bench.run.causes,
sandbox.faults), never from its message or its class's name; records carry the
cause, and rows of older runs are still read by their message."""

from __future__ import annotations

import importlib
import json
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import docker.errors
import psycopg
import pytest

from bench.dataset import Task
from bench.llm.client import ModelEndpointError
from bench.run.attempt import AttemptFailure
from bench.run.causes import CAUSES, causes_text, count_causes, fault_of, legacy_cause
from bench.run.errors import NotEnoughMemory, RubricsNeedJudge
from bench.run.golden import GoldenNotCached, GoldenReplayError
from bench.run.held import SandboxLost
from bench.run.output import RunOutput
from bench.run.recording import write_retried_error, write_system_error
from bench.run.results import ResultRow, read_rows
from judge import AttemptRecord, JudgeReplyError, JudgeUnavailable
from sandbox import (
    NODE_FAULT,
    ContainerLostError,
    ContainerStartError,
    DockerUnavailableError,
    Fault,
    ImageMissingError,
    Loss,
    NetworkPoolExhaustedError,
    SandboxError,
    SandboxGoneError,
    SeedError,
)
from sandbox.container_fate import Fate
from sandbox.proxy.models import UpstreamUnreachable
from sandbox.proxy.watch import DaemonUnreachable

# Every system error class, made with a message of the caller's choosing, and the
# cause and retryability its type says.
ERRORS: list[tuple[Callable[[str], BaseException], str, bool]] = [
    (
        lambda m: ModelEndpointError(m, role="agent", model="m", base_url="u", attempts=3),
        "model endpoint",
        True,
    ),
    (SandboxGoneError, "container", True),
    (lambda m: SandboxLost(m, "its postgres container exited"), "container", True),
    (ContainerStartError, "container", True),
    (lambda m: ContainerLostError(m, Fate("postgres", "exited")), "container", True),
    (SeedError, "container", True),
    (DaemonUnreachable, "node", True),
    (DockerUnavailableError, "node", True),
    (NetworkPoolExhaustedError, "node", True),
    (ImageMissingError, "node", True),
    (NotEnoughMemory, "node", True),
    (GoldenReplayError, "golden replay", False),
    (GoldenNotCached, "golden replay", False),
    (lambda m: RubricsNeedJudge(2), "other", False),
    (SandboxError, "other", True),
    (UpstreamUnreachable, "other", True),  # as ProxyError was; the admin API answers it 502
    # libraries' (and judge's) errors, mapped by type in one place
    (JudgeUnavailable, "judge", True),
    (JudgeReplyError, "judge", True),
    (lambda m: docker.errors.APIError(m), "node", True),
    (lambda m: docker.errors.NotFound(m), "other", True),
    (psycopg.OperationalError, "other", True),
    (OSError, "other", True),
    (KeyError, "other", True),
]
# Words an old classifier read meaning, and a message with none at all.
MESSAGES = [
    "sandbox state unknown: cannot ask the Docker daemon (refused)",
    "GoldenReplayError: a message naming another class",
    "",
]


def _name(make: Callable[[str], BaseException]) -> str:
    return type(make("x")).__name__


@pytest.mark.parametrize(("make", "cause", "retryable"), ERRORS, ids=[_name(m) for m, _, _ in ERRORS])
@pytest.mark.parametrize("message", MESSAGES)
def test_the_type_says_the_cause_and_retryability_whatever_the_message(
    make: Callable[[str], BaseException], cause: str, retryable: bool, message: str
) -> None:
    assert fault_of(make(message)) == Fault(cause, retryable)  # type: ignore[arg-type]


@pytest.mark.parametrize(("make", "cause", "retryable"), ERRORS, ids=[_name(m) for m, _, _ in ERRORS])
def test_a_renamed_class_keeps_its_cause(
    make: Callable[[str], BaseException], cause: str, retryable: bool
) -> None:
    error = make("x")
    renamed = type("SomethingElseEntirely", (type(error),), {})
    if type(error).__module__ == "builtins":
        error = renamed("x")  # a builtin's instance cannot change class
    else:
        error.__class__ = renamed
    assert type(error).__name__ == "SomethingElseEntirely"
    assert fault_of(error) == Fault(cause, retryable)  # type: ignore[arg-type]


def _error_classes() -> Iterator[type[BaseException]]:
    for module in (
        "sandbox.errors",
        "sandbox.proxy.models",
        "sandbox.proxy.watch",
        "bench.run.errors",
        "bench.run.golden",
        "bench.llm.client",
        "bench.run.held",
        "judge.rubric",
    ):
        importlib.import_module(module)
    seen: set[type[BaseException]] = set()
    todo: list[type[BaseException]] = [BaseException]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    yield from (c for c in seen if c.__module__.split(".")[0] in ("bench", "sandbox", "judge"))


def test_every_class_the_old_table_named_counts_as_it_did() -> None:
    # The old records' table (bench.run.causes.legacy_cause) and the types agree, so the
    # counts by cause of the same faults stay what they were.
    named = {c.__name__: c for c in _error_classes()}
    for make, cause, _ in ERRORS:
        kind = _name(make)
        if kind in named or kind == "APIError":
            assert legacy_cause(f"{kind}: x") == cause, kind
    assert {"SandboxGoneError", "ContainerLostError", "GoldenReplayError", "DaemonUnreachable"} <= set(named)


def test_every_fault_names_a_cause() -> None:
    for cls in _error_classes():
        fault = getattr(cls, "fault", None)
        if fault is not None:
            assert isinstance(fault, Fault) and fault.cause in CAUSES, cls


def test_a_lost_sandbox_whose_daemon_could_not_be_asked_is_the_nodes() -> None:
    unknown = Fate("postgres", "state of its postgres container unknown", unknown=True)
    assert unknown.fault == NODE_FAULT and Fate("postgres", "exited").fault.cause == "container"
    assert Loss("sandbox state unknown", unknown=True).fault == NODE_FAULT
    assert Loss("sandbox gone: its postgres container exited").fault.cause == "container"
    for error in (
        SandboxGoneError("attempt a: its postgres container exited", fault=NODE_FAULT),
        SandboxLost("tool call t: gone", "gone", fault=NODE_FAULT),
    ):
        assert fault_of(error) == NODE_FAULT
        # a node's error comes back from another process the same (Ray pickles it)
        again = pickle.loads(pickle.dumps(error))
        assert fault_of(again) == NODE_FAULT and str(again) == str(error)
    assert fault_of(SandboxGoneError("cannot ask the Docker daemon")).cause == "container"


def test_an_attempt_failure_carries_its_fault_across_json() -> None:
    failure = AttemptFailure.of(GoldenReplayError("golden replay of t failed"))
    again = AttemptFailure.model_validate_json(failure.model_dump_json())
    assert again.fault == Fault("golden replay", retryable=False)
    assert str(again) == "GoldenReplayError: golden replay of t failed"


def test_the_records_carry_the_cause_and_old_rows_are_read_by_their_message(tmp_path: Path) -> None:
    output = RunOutput(tmp_path)
    task = Task(
        id="t1", file="", uid="t1", source="", scenario="retail", domain="retail", server="retail", query=""
    )

    def record(attempt: str) -> AttemptRecord:
        return AttemptRecord(task_id="t1", attempt_id=attempt, run_id="r", repeat=0, domain="retail")

    # A message that would once have counted as the node's: the type says container.
    message = "SandboxGoneError: sandbox state unknown: cannot ask the Docker daemon"
    write_retried_error(output, task, record("a1"), None, message, "", {}, fault=Fault("container"), tries=1)
    row = write_system_error(output, task, record("a2"), None, message, "", {}, fault=Fault("container"))
    lines = [json.loads(line) for line in output.errors.read_text().splitlines()]
    assert [(e["cause"], e["retryable"]) for e in lines] == [("container", True), ("container", True)]
    [read] = read_rows(output.results)
    assert read.cause == row.cause == read.error_cause == "container"
    # A row of a run before causes were recorded: its message says it.
    old = ResultRow(task_id="t1", repeat=1, domain="retail", passed=False, system_error=True, error=message)
    assert old.cause is None and old.error_cause == "node"
    # Graded rows carry no cause.
    graded = ResultRow(task_id="t1", repeat=2, domain="retail", passed=True)
    assert "cause" not in json.loads(graded.to_json_line())


# ---- old records: the messages tbx wrote before it recorded causes -----------------------
OLD_MESSAGES = [
    (
        "ModelEndpointError: agent model endpoint http://x/v1 (model m) still failing after 7 attempts",
        "model endpoint",
    ),
    (
        "SandboxGoneError: attempt a: sandbox gone: its postgres container tbx-1 (abc) exited with code 137",
        "container",
    ),
    (
        "ContainerStartError: sandbox start failed: its typesense container t (abc) was OOM-killed",
        "container",
    ),
    ("SandboxGoneError: attempt a: sandbox state unknown: cannot ask the Docker daemon (refused)", "node"),
    ("NetworkPoolExhaustedError: no free /27 subnet left in tbx's address range 10.213.0.0/16", "node"),
    ("DockerUnavailableError: cannot reach the Docker daemon", "node"),
    ("GoldenReplayError: golden replay of t failed", "golden replay"),
    ("JudgeUnavailable: judge endpoint down", "judge"),
    ("OperationalError: connection refused", "other"),
    ("no colon at all", "other"),
]


@pytest.mark.parametrize(("message", "cause"), OLD_MESSAGES)
def test_the_cause_of_an_old_recorded_message(message: str, cause: str) -> None:
    assert legacy_cause(message) == cause


def test_counts_come_in_a_fixed_order_and_leave_out_causes_with_none() -> None:
    counts = count_causes(legacy_cause(m) for m, _ in OLD_MESSAGES)
    assert list(counts) == [c for c in CAUSES if c in counts]
    assert counts == {
        "model endpoint": 1,
        "container": 2,
        "node": 3,
        "golden replay": 1,
        "judge": 1,
        "other": 2,
    }
    assert causes_text({"container": 2, "model endpoint": 1}) == "model endpoint 1, container 2"
    assert causes_text({}) == ""
