"""OpenEnv's Task API over the served task list (what an RL loop reads to choose `test_uid`s).

    GET  /list_environments            -> [ENV_NAME]
    GET  /{env}/splits                 -> [{"name": "test", "type": "test"}]
    POST /{env}/tasks      {split}     -> {"tasks": [TASK...], "env_name"}
    POST /{env}/num_tasks  {split}     -> {"num_tasks"}
    POST /{env}/task       {split, index}        -> {"task": TASK}
    POST /{env}/task_range {split, start?, stop?} -> {"tasks": [TASK...]}

A TASK names the task and where it lives: `test_uid` (what `reset` takes), `uid`,
`domain`, `scenario`, `has_rubrics`, `index`. Never its query's answer: no golden
calls, end states, rubrics or the customer's private context (the query itself is
the reset observation's `task`).

One split, `test`: the served list is one list; ThinkingBox-Bench v1.0 is evaluation
data, so a training loop serves its own task list (`tbx env serve --tasks FILE`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.dataset import Task
from bench.env.protocol import EnvError, ErrorCode

ENV_NAME = "tbx-thinkingbox"
SPLIT = "test"
MAX_INDEX = 10**9

M = TypeVar("M", bound="_SplitBody")


class _SplitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: str = Field(max_length=128)


class _TaskBody(_SplitBody):
    index: int = Field(ge=-MAX_INDEX, le=MAX_INDEX)


class _RangeBody(_SplitBody):
    start: int | None = Field(default=None, ge=-MAX_INDEX, le=MAX_INDEX)
    stop: int | None = Field(default=None, ge=-MAX_INDEX, le=MAX_INDEX)


def describe(task: Task, index: int) -> dict[str, Any]:
    return {
        "index": index,
        "test_uid": task.id,
        "uid": task.uid,
        "domain": task.domain,
        "scenario": task.scenario,
        "has_rubrics": task.has_rubrics,
    }


class TaskApi:
    def __init__(self, tasks: list[Task]):
        self.tasks = tasks

    @staticmethod
    def check_env(env_name: str) -> None:
        if env_name.lower() != ENV_NAME:
            raise EnvError(
                ErrorCode.VALIDATION_ERROR,
                f"unknown environment {env_name[:80]!r}: this is {ENV_NAME!r}",
                404,
            )

    @staticmethod
    def splits() -> list[dict[str, str]]:
        return [{"name": SPLIT, "type": "test"}]

    def _body(self, model: type[M], data: Any) -> M:
        try:
            body = model.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in exc.errors()
            )
            raise EnvError(ErrorCode.VALIDATION_ERROR, f"invalid request: {problems}", 422) from None
        split = body.split
        if split != SPLIT:
            raise EnvError(
                ErrorCode.VALIDATION_ERROR, f"unknown split {split[:80]!r}: the one split is {SPLIT!r}", 404
            )
        return body

    def list_tasks(self, data: Any) -> dict[str, Any]:
        self._body(_SplitBody, data)
        return {"tasks": [describe(t, i) for i, t in enumerate(self.tasks)], "env_name": ENV_NAME}

    def num_tasks(self, data: Any) -> dict[str, Any]:
        self._body(_SplitBody, data)
        return {"num_tasks": len(self.tasks)}

    def task(self, data: Any) -> dict[str, Any]:
        body = self._body(_TaskBody, data)
        n = len(self.tasks)
        if not -n <= body.index < n:
            raise EnvError(ErrorCode.VALIDATION_ERROR, f"Invalid task index {body.index}: {n} task(s)", 400)
        index = body.index % n
        return {"task": describe(self.tasks[index], index)}

    def task_range(self, data: Any) -> dict[str, Any]:
        body = self._body(_RangeBody, data)
        indices = range(len(self.tasks))[body.start : body.stop]
        return {"tasks": [describe(self.tasks[i], i) for i in indices]}
