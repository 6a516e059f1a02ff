"""The judge's typed records: what crosses the judge's boundary.

* `ToolCallView` - one tool call of a trajectory, as the judge sees it.
* `Effects` - what an attempt (or the golden replay) changed, per table.
* `Difference` - one labelled way an attempt's end state differs from golden.
* `RubricAnswer` - one yes/no rubric question answered by the LLM judge.
* `Verdict` - the judge's decision for one attempt.
* `GoldenState` - a task's golden end state (computed by `bench.run.golden`).
* `AttemptRecord` - the on-disk record of one attempt (RESULTS/attempts/*.json),
  written by the runner and read by `tbx judge regrade` (the files:
  `judge.record_files`).

All states are canonical states (`judge.canonical.State`): unstable fields
already dropped, primitive lists sorted, rows in canonical order.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from judge.canonical import State
from judge.test_function import TestFunctionResult

SCHEMA_VERSION = 1

Signature = Literal[
    "tool_use",
    "wrong_state_update",
    "incomplete_resolution",
    "no_state_change",
    "rubric_failed",
    "resource_limit",
    "test_assert",  # the task's test function failed an assert the state alone does not explain
    "context_limit",  # the agent's conversation outgrew its model's context (a finish reason of tbx's)
]
SIGNATURES: tuple[Signature, ...] = get_args(Signature)
DifferenceKind = Literal["wrong_value", "missing_effect", "extra_effect", "row_order"]
EffectOp = Literal["insert", "update", "delete"]


class ToolCallView(BaseModel):
    """One tool call as recorded by the tool proxy (or a replay)."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    is_error: bool = False  # the MCP isError flag (unknown tool, proxy rejection, limit hit)
    error_envelope: bool = False  # the reply is the server's in-band {"error": ...} object
    latency_ms: float = 0.0

    @property
    def failed(self) -> bool:
        return self.is_error or self.error_envelope

    @staticmethod
    def envelope(result: str) -> bool:
        """True when a reply text is the reference's in-band error object."""
        text = result.lstrip()
        if not text.startswith("{"):
            return False
        try:
            payload = json.loads(text)
        except ValueError:
            return False
        return isinstance(payload, dict) and "error" in payload and set(payload) <= {"error", "tool"}

    @classmethod
    def from_reply(
        cls, tool: str, arguments: dict[str, Any], result: str, is_error: bool, latency_ms: float = 0.0
    ) -> ToolCallView:
        return cls(
            tool=tool,
            arguments=arguments,
            result=result,
            is_error=is_error,
            error_envelope=cls.envelope(result),
            latency_ms=latency_ms,
        )


class RowEffect(BaseModel):
    """One changed row. Insert: `after` is the whole new row. Delete: `before`
    is the whole removed row. Update: `before`/`after` hold only the fields
    whose value changed."""

    key: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class TableEffects(BaseModel):
    inserted: list[RowEffect] = Field(default_factory=list)
    updated: list[RowEffect] = Field(default_factory=list)
    deleted: list[RowEffect] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.inserted or self.updated or self.deleted)


class Effects(BaseModel):
    """Per table (changed tables only), the rows inserted, updated and deleted,
    matched by primary key between two canonical states."""

    tables: dict[str, TableEffects] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return all(t.empty for t in self.tables.values())

    def counts(self) -> dict[str, dict[str, int]]:
        return {
            name: {"inserted": len(t.inserted), "updated": len(t.updated), "deleted": len(t.deleted)}
            for name, t in self.tables.items()
        }

    def total(self) -> int:
        return sum(len(t.inserted) + len(t.updated) + len(t.deleted) for t in self.tables.values())


class Difference(BaseModel):
    """One labelled way the attempt's end state differs from golden.

    wrong_value     both changed `field` of row `key` (or both inserted the row), to different values
    missing_effect  golden made the change (`op`), the attempt did not
    extra_effect    the attempt made the change (`op`), golden did not
    row_order       same rows, different order (tables without an `id` field keep insertion order)
    """

    kind: DifferenceKind
    table: str
    key: str | None = None
    field: str | None = None
    op: EffectOp | None = None
    expected: Any = None
    actual: Any = None

    def describe(self) -> str:
        where = self.table + (f"[{self.key}]" if self.key is not None else "")
        if self.field is not None:
            where += f".{self.field}"
        if self.kind == "wrong_value":
            return f"wrong value {where}: expected {_short(self.expected)}, got {_short(self.actual)}"
        if self.kind == "row_order":
            return f"row order {where}: expected {_short(self.expected)}, got {_short(self.actual)}"
        label = "missing" if self.kind == "missing_effect" else "unexpected"
        if self.op == "update":
            return f"{label} update {where}: expected {_short(self.expected)}, got {_short(self.actual)}"
        return f"{label} {self.op} {where}"


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RubricAnswer(BaseModel):
    """The LLM judge's answer to one yes/no rubric. `answer` is None when the
    judge's reply could not be parsed (a judge error, never a yes; the json style
    only: in the reference style every reply is a yes or a no)."""

    question: str
    answer: Literal["yes", "no"] | None = None
    reason: str = ""
    error: str | None = None
    raw: str = ""  # the judge's reply text (truncated)
    model: str = ""
    requests: int = 0  # HTTP requests made (retries included)
    # What the question cost, summed over its re-asks: input_tokens (cached ones included),
    # output_tokens, cached_tokens, requests. None in records written before it was kept.
    usage: dict[str, int] | None = None

    @property
    def passed(self) -> bool:
        return self.answer == "yes"

    @property
    def judge_error(self) -> bool:
        """The judge's reply could not be read: neither a yes nor the agent's no."""
        return self.answer is None


class Verdict(BaseModel):
    task_id: str
    passed: bool
    strict: bool  # canonical terminal state hash == golden hash (the reference's rule)
    terminal_hash: str
    golden_hash: str
    initial_hash: str
    differences: list[Difference] = Field(default_factory=list)
    effects: Effects = Field(default_factory=Effects)  # the attempt's own effects vs its initial state
    rubric_answers: list[RubricAnswer] = Field(default_factory=list)
    rubrics_passed: bool | None = None  # None: the task has no rubrics
    signature: Signature | None = None  # set for every failed attempt
    judge_errors: int = 0  # rubric replies that could not be parsed
    # The attempt's own calls drove its sandbox over a limit (why, in words): a failure
    # whatever its state; the state's differences, when it could still be read, beside it.
    resource_limit: str | None = None
    # The task's test function ran (Task.runs_function): how it ended, and the reward it
    # gave (1.0 on a plain pass, a returned number in [0, 1]; 0.0 on a failure).
    test_function: TestFunctionResult | None = None
    reward: float | None = None

    def summary(self) -> str:
        if self.passed:
            return "pass"
        head = f"fail [{self.signature}]"
        lines = [self.resource_limit[:300]] if self.resource_limit else []
        lines += [d.describe() for d in self.differences[:5]]
        lines += [
            f"{'judge error' if a.judge_error else 'rubric no'}: {a.question[:80]}"
            for a in self.rubric_answers
            if not a.passed
        ][:3]
        tf = self.test_function
        if tf is not None and not tf.result:
            lines.append(f"line {tf.lineno}: {tf.line_content.strip()[:120]}: {(tf.message or '')[:200]}")
        return head + ("; " + "; ".join(lines) if lines else "")


class GoldenState(BaseModel):
    """A task's golden end state: its golden calls replayed in a fresh sandbox."""

    task_id: str
    key: str  # the content hash it is cached under
    initial_state: State
    final_state: State
    initial_hash: str
    golden_hash: str
    calls: list[ToolCallView] = Field(default_factory=list)


class AttemptRecord(BaseModel):
    """One attempt as written by the runner to RESULTS/attempts/<attempt_id>.json
    and read back by `tbx judge regrade`.

    States are either inline (`initial_state`, `terminal_state`) or in files
    (`*_state_path`: relative to the record's directory or absolute; `.json`
    or `.json.gz` holding the canonical state object). Unknown keys are kept
    on rewrite, so the runner may add its own fields.
    """

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    task_id: str
    attempt_id: str = ""
    run_id: str = ""
    repeat: int = 0
    domain: str | None = None
    initial_state: State | None = None
    initial_state_path: str | None = None
    terminal_state: State | None = None
    terminal_state_path: str | None = None
    # Calls replayed before the agent had the episode (an OpenEnv reset's or a Session API
    # create's `prefix`, or a fork's calls so far), in order; `trajectory` holds the agent's own.
    prefix: list[ToolCallView] = Field(default_factory=list)
    trajectory: list[ToolCallView] = Field(default_factory=list)
    final_message: str | None = None
    rubric_answers: list[RubricAnswer] | None = None
    system_error: str | None = None  # set when the attempt never produced a judgeable state
    # the attempt's own load hit a limit (judge.verdict.limit_verdict): a failure, graded so again
    resource_limit: str | None = None
    verdict: Verdict | None = None
