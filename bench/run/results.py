"""The result row contract: one line of a run's `results.jsonl` per attempt,
and the reader for a run directory (`results.jsonl`, `errors.jsonl`,
`manifest.json`).

`ResultRow` is what `bench.report.metrics` and `tbx report` need; the runner writes
it (and may add any field of its own: extra keys are kept). A row with
`system_error` set is an attempt that never produced a judgeable state
(container failed, model endpoint down, judge outage); metrics keep it out
of every denominator and count it beside them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bench.llm.config import Price
from bench.run.causes import legacy_cause
from sandbox import Cause

RESULTS_FILE = "results.jsonl"
ERRORS_FILE = "errors.jsonl"
MANIFEST_FILE = "manifest.json"


class ResultsError(ValueError):
    """A run directory or one of its files is missing or malformed."""


# Numeric extras of a role's usage (bench.llm.client.Usage's) that add up across tries.
COUNTED_EXTRAS = ("calls", "latency_ms")


class RoleUsage(BaseModel):
    """Token totals of one LLM role (agent, user, judge) in one attempt.

    `input_tokens` includes `cached_tokens` (OpenAI's `prompt_tokens`).
    `cost_usd`, when present, wins over any price table.
    """

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    input_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)

    @property
    def empty(self) -> bool:
        return not (self.input_tokens or self.cached_tokens or self.output_tokens)

    def plus(self, other: RoleUsage) -> RoleUsage:
        """Both spends together: tokens and request counts added, the models named once;
        the cost recorded when every part that used tokens recorded one (else None: the
        tokens are priced by the table)."""
        names = [m for u in (self, other) if u.model for m in u.model.split(",")]
        used = [u for u in (self, other) if not u.empty]
        costs = [u.cost_usd for u in used]
        extra = {
            key: (self.model_extra or {}).get(key, 0) + (other.model_extra or {}).get(key, 0)
            for key in COUNTED_EXTRAS
            if key in (self.model_extra or {}) or key in (other.model_extra or {})
        }
        return RoleUsage(
            model=",".join(dict.fromkeys(names)) or None,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=None if not used or None in costs else sum(c for c in costs if c is not None),
            **extra,
        )

    def cost(self, prices: Mapping[str, Price], model: str | None = None) -> float | None:
        """USD: `cost_usd` if recorded, else tokens × the price of `self.model`
        (or `model` when the row names none); 0 for no tokens; None when unpriced."""
        if self.cost_usd is not None:
            return self.cost_usd
        if self.empty:
            return 0.0
        price = prices.get(self.model or model or "")
        if price is None:
            return None
        return price.cost(self.input_tokens, self.cached_tokens, self.output_tokens)


def add_usage(*parts: Mapping[str, RoleUsage]) -> dict[str, RoleUsage]:
    """Per role, the spends of `parts` together (RoleUsage.plus)."""
    out: dict[str, RoleUsage] = {}
    for part in parts:
        for role, u in part.items():
            out[role] = out[role].plus(u) if role in out else u
    return out


class ResultRow(BaseModel):
    """One attempt (task × repeat) of a run.

    `signature` is the judge's failure label for a failed attempt
    (tool_use | wrong_state_update | incomplete_resolution | no_state_change |
    rubric_failed), None for a pass or a system error. `usage` is per role;
    `timings` is seconds per phase (e.g. sandbox, agent, judge, teardown).
    `usage` is the spend of the try the row records (a system error's too: what its
    trajectory held; the rubric judge's under `judge`); `retried_usage` the spend of the
    earlier tries of its (task, repeat) that ended in a system error and were retried
    (written only when there were any). `judge_errors`: rubric replies the judge gave
    that could not be read (never a yes).
    `system_error` also accepts the error message (a string), which is then
    kept as `error`. `cause` is a system error's cause (sandbox.faults), written
    with it; rows of older runs lack it (`error_cause` reads their message).
    """

    model_config = ConfigDict(extra="allow")

    task_id: str = Field(min_length=1)
    repeat: int = Field(ge=0)
    domain: str
    passed: bool
    system_error: bool = False
    error: str | None = None
    cause: Cause | None = None  # a system error's (written only on those rows)
    signature: str | None = None
    finish_reason: str | None = None
    usage: dict[str, RoleUsage] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    retried_usage: dict[str, RoleUsage] = Field(default_factory=dict)
    judge_errors: int = Field(default=0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _error_message(cls, data: Any) -> Any:
        if isinstance(data, dict):
            value = data.get("system_error")
            if value is None and "system_error" in data:
                data = {**data, "system_error": False}
            elif isinstance(value, str):
                data = {**data, "system_error": bool(value)}
                if value and data.get("error") is None:
                    data["error"] = value
        return data

    @property
    def error_cause(self) -> Cause:
        """The cause of this row's system error: as recorded, or for a row of a run that
        did not record causes, as its message said (bench.run.causes.legacy_cause)."""
        return self.cause if self.cause is not None else legacy_cause(self.error or "")

    @property
    def valid(self) -> bool:
        """Counts in the score (not a system error)."""
        return not self.system_error

    @property
    def part_way(self) -> bool:
        """The episode started part-way: calls replayed before the agent had it (an OpenEnv
        reset's or a Session API create's `prefix`, or a fork). Written only on those rows."""
        return bool((self.model_extra or {}).get("prefix_calls"))

    def cost(
        self,
        prices: Mapping[str, Price],
        roles: Iterable[str] = ("agent",),
        role_models: Mapping[str, str] | None = None,
    ) -> float | None:
        """USD spent by `roles` in this attempt; None when any of them used
        tokens that have neither a recorded cost nor a price."""
        total = 0.0
        for role in roles:
            u = self.usage.get(role)
            if u is None:
                continue
            c = u.cost(prices, (role_models or {}).get(role))
            if c is None:
                return None
            total += c
        return total

    @property
    def spent_usage(self) -> dict[str, RoleUsage]:
        """Per role, every token this (task, repeat) spent: its row's try and the retried ones."""
        return add_usage(self.usage, self.retried_usage)

    def spent(
        self,
        prices: Mapping[str, Price],
        roles: Iterable[str] = ("agent",),
        role_models: Mapping[str, str] | None = None,
    ) -> float | None:
        """USD `roles` spent on this (task, repeat), its retried tries included (`cost` is
        the row's own try); None when some of it is unpriced."""
        retried = self.model_copy(update={"usage": self.retried_usage}).cost(prices, roles, role_models)
        own = self.cost(prices, roles, role_models)
        return None if own is None or retried is None else own + retried

    def to_json_line(self) -> str:
        data = self.model_dump(mode="json", exclude_none=False)
        if data.get("cause") is None:
            data.pop("cause", None)  # only a system error's row has one
        for key in ("retried_usage", "judge_errors"):  # only on the rows that have some
            if not data.get(key):
                data.pop(key, None)
        return json.dumps(data, ensure_ascii=False) + "\n"


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(row)'}: {e['msg']}" for e in exc.errors())


def read_rows(path: Path) -> list[ResultRow]:
    """Every row of a results.jsonl file; a malformed line raises ResultsError naming it."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror or exc}") from None
    rows: list[ResultRow] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path}:{n}: not JSON: {exc.msg}") from None
        try:
            rows.append(ResultRow.model_validate(data))
        except ValidationError as exc:
            raise ResultsError(f"{path}:{n}: {_problems(exc)}") from None
    return rows


class RunDir(BaseModel):
    """What a run directory holds, as read by `load_run`."""

    path: str
    manifest: dict[str, Any] = Field(default_factory=dict)
    rows: list[ResultRow] = Field(default_factory=list)
    errors: list[dict[str, Any]] = Field(default_factory=list)  # errors.jsonl lines
    superseded: int = 0  # rows replaced by a later row for the same (task_id, repeat)
    # those rows: in no figure, but what their tries spent was spent (bench.report.metrics)
    replaced: list[ResultRow] = Field(default_factory=list)
    # of those, graded rows (not system errors, which a resumed run retries): two graded
    # attempts under one (task_id, repeat) is a collision, not a retry
    collisions: int = 0

    @property
    def from_the_start(self) -> list[ResultRow]:
        """The rows a score is computed from: attempts whose agent had the episode from its
        first call. One that started part-way (`ResultRow.part_way`) is an experiment on its
        task, not an attempt at it (a golden prefix passes whatever the agent does), so it is
        listed and viewed but never mixed into the task's figures."""
        return [r for r in self.rows if not r.part_way]


def dedupe_rows(rows: list[ResultRow]) -> tuple[list[ResultRow], int]:
    """The last row per (task_id, repeat) wins (a resumed run may re-run an
    attempt that ended in a system error); returns (rows, superseded count)."""
    last: dict[tuple[str, int], ResultRow] = {}
    for r in rows:
        last[(r.task_id, r.repeat)] = r
    return list(last.values()), len(rows) - len(last)


def colliding_rows(rows: list[ResultRow]) -> int:
    """Graded rows superseded by a later row for the same (task_id, repeat)."""
    later: set[tuple[str, int]] = set()
    count = 0
    for r in reversed(rows):
        key = (r.task_id, r.repeat)
        if key in later and not r.system_error:
            count += 1
        later.add(key)
    return count


def load_run(path: str | Path) -> RunDir:
    """Read a run directory. results.jsonl is required; manifest.json and
    errors.jsonl are optional."""
    root = Path(path)
    if not root.is_dir():
        raise ResultsError(f"{root}: not a directory")
    results = root / RESULTS_FILE
    if not results.is_file():
        raise ResultsError(f"{root}: no {RESULTS_FILE} (is this a tbx run directory?)")
    all_rows = read_rows(results)
    rows, superseded = dedupe_rows(all_rows)
    kept = {id(r) for r in rows}
    manifest: dict[str, Any] = {}
    mpath = root / MANIFEST_FILE
    if mpath.is_file():
        try:
            loaded = json.loads(mpath.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ResultsError(f"{mpath}: unreadable manifest: {exc}") from None
        if not isinstance(loaded, dict):
            raise ResultsError(f"{mpath}: expected a JSON object")
        manifest = loaded
    errors: list[dict[str, Any]] = []
    epath = root / ERRORS_FILE
    if epath.is_file():
        for n, line in enumerate(epath.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ResultsError(f"{epath}:{n}: not JSON: {exc.msg}") from None
            errors.append(item if isinstance(item, dict) else {"error": item})
    return RunDir(
        path=str(root),
        manifest=manifest,
        rows=rows,
        errors=errors,
        superseded=superseded,
        replaced=[r for r in all_rows if id(r) not in kept],
        collisions=colliding_rows(all_rows),
    )
