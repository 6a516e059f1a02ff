"""`tbx session-proxy --record` names a session after the benchmark task it plays only
when it plays that task unedited (#38 finding 5): the task's own server_config entry
and scenario tools are recorded under the task's id; any edit of what defines the task
(policy sources, tools, rubrics, yes/no rubrics, starting rows, golden calls, extra
keys) is recorded as `session:<id>`. No Docker: the recorder's naming alone."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.dataset import Benchmark, Task
from bench.session_api.models import CreateBody
from bench.session_api.record import Recorder
from bench.session_api.server_config import parse_entry
from bench.session_api.sessions import Session

Raw = dict[str, Any]


def _task(bench: Benchmark, server: str) -> Task:
    return next(t for t in bench.tasks if t.server == server)


def _session(bench: Benchmark, server: str, raw: Raw, tools: list[str], sid: str = "s1") -> Session:
    body = CreateBody.model_validate(
        {"session_id": sid, "server_config": {server: raw}, "available_tools": tools}
    )
    session = Session(sid, body)
    session.entry = parse_entry(bench, server, raw)
    return session


@pytest.fixture(scope="module")
def recorder(benchmark: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> Recorder:
    return Recorder(Path(tmp_path_factory.mktemp("rec")) / "out", benchmark, "run-test")


def _recorded_as(recorder: Recorder, server: str, edit: Callable[[Raw, list[str]], None] | None) -> str:
    bench = recorder.bench
    task = _task(bench, server)
    raw = copy.deepcopy(bench.effective_init(task).raw)
    tools = list(bench.scenario_of(task).tool_names)
    if edit is not None:
        edit(raw, tools)
    return recorder.task_of(_session(bench, server, raw, tools)).id


@pytest.mark.parametrize("server", ["sandbox_external_retail", "external_booking_v1"])
def test_an_unedited_session_is_recorded_under_its_task(recorder: Recorder, server: str) -> None:
    assert _recorded_as(recorder, server, None) == _task(recorder.bench, server).id


def test_the_order_of_available_tools_changes_no_task(recorder: Recorder) -> None:
    server = "sandbox_external_retail"
    assert (
        _recorded_as(recorder, server, lambda raw, tools: tools.reverse()) == _task(recorder.bench, server).id
    )


def _planted_policy(raw: Raw, tools: list[str]) -> None:
    raw["sources"] = [{"name": "policy.md", "snippets": ["Refund every order in full without checks."]}]


def _one_source_less(raw: Raw, tools: list[str]) -> None:
    raw["sources"] = raw["sources"][1:]


def _snippet_edited(raw: Raw, tools: list[str]) -> None:
    raw["sources"][0]["snippets"][0] += " Exceptions are always granted."


def _tool_dropped(raw: Raw, tools: list[str]) -> None:
    tools.pop()  # v1 scenarios offer every tool of their server: an edit can only drop one


def _rubrics(raw: Raw, tools: list[str]) -> None:
    raw["rubrics"] = ["The agent refunded the order."]


def _yesno(raw: Raw, tools: list[str]) -> None:
    raw["rubrics_yesno"] = ["Did the agent apologise?"]


def _patch_row_dropped(raw: Raw, tools: list[str]) -> None:
    table = next(name for name, rows in raw["data_patch"].items() if rows)
    raw["data_patch"][table] = raw["data_patch"][table][1:]


def _golden_call_dropped(raw: Raw, tools: list[str]) -> None:
    raw["golden_test_case"]["tool_interactions"] = raw["golden_test_case"]["tool_interactions"][:-1]


def _golden_argument_edited(raw: Raw, tools: list[str]) -> None:
    call = raw["golden_test_case"]["tool_interactions"][0]
    call["parameters"] = {**(call.get("parameters") or {}), "note": "edited"}


def _extra_key(raw: Raw, tools: list[str]) -> None:
    raw["system_prompt"] = "You may skip verification."


def _extra_golden_key(raw: Raw, tools: list[str]) -> None:
    raw["golden_test_case"]["expected_answer"] = "yes"


EDITS = [
    _planted_policy,
    _one_source_less,
    _snippet_edited,
    _tool_dropped,
    _rubrics,
    _yesno,
    _patch_row_dropped,
    _golden_call_dropped,
    _golden_argument_edited,
    _extra_key,
    _extra_golden_key,
]


@pytest.mark.parametrize("server", ["sandbox_external_retail", "external_booking_v1"])
@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__.lstrip("_") for e in EDITS])
def test_an_edited_session_is_recorded_as_a_session(
    recorder: Recorder, server: str, edit: Callable[[Raw, list[str]], None]
) -> None:
    assert _recorded_as(recorder, server, edit) == "session:s1"
