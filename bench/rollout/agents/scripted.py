"""`scripted`: a test author's own calls per task, read from a JSON file (`tbx run --agent
scripted --script FILE`), played in order through the attempt's tool proxy like any agent's,
then closed with the file's final text. It checks a test against a known-good or known-bad
trajectory, and gives tasks without golden calls an oracle.

    {"<task id or test uid>": {"calls": [{"tool": NAME, "arguments": {...}}], "final": "text"}}

A task missing from the file makes no call and ends with an empty final text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError


class AgentScriptError(ValueError):
    """The script file cannot be read or is not of the documented form (a usage error)."""


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedTask(BaseModel):
    """One task's calls, in order, and the agent's closing text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: list[ScriptedCall] = Field(default_factory=list)
    final: str = ""


class AgentScript(RootModel[dict[str, ScriptedTask]]):
    """The whole file: task id (`<file>.py:<uid>`) or bare test uid -> its script."""

    def for_task(self, task_id: str, uid: str) -> ScriptedTask:
        """The entry of the task (its id first, then its uid); none: no calls, empty final text."""
        return self.root.get(task_id) or self.root.get(uid) or ScriptedTask()

    def unknown_keys(self, tasks: Iterable[tuple[str, str]]) -> list[str]:
        """Keys naming none of `tasks` ((id, uid) pairs): the run's warning."""
        known = {name for pair in tasks for name in pair}
        return sorted(k for k in self.root if k not in known)

    def digest(self) -> str:
        """sha256 of the canonical JSON: what the run's bundle holds (spacing does not count)."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def manifest_entry(self, path: Path) -> dict[str, Any]:
        return {"path": str(path), "sha256": self.digest(), "tasks": len(self.root)}


def _first_problem(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(p) for p in e["loc"]) or "(top)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {e['msg']}{more}"


def parse_agent_script(data: Any, source: str = "<script>") -> AgentScript:
    if not isinstance(data, Mapping):
        raise AgentScriptError(
            f'{source}: expected a JSON object {{"<task id>": {{"calls": [...], "final": "..."}}}}'
        )
    try:
        return AgentScript.model_validate(dict(data))
    except ValidationError as exc:
        raise AgentScriptError(f"{source}: {_first_problem(exc)}") from None


def load_agent_script(path: str | Path) -> AgentScript:
    """The script file at `path`; AgentScriptError (one line) when it is unreadable or malformed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentScriptError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AgentScriptError(f"{path}: not JSON ({exc})") from None
    return parse_agent_script(data, str(path))
