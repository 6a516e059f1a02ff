"""Problems found in a benchmark directory, and the error that carries them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

Severity = Literal["error", "warning"]


class Problem(BaseModel):
    """One thing wrong with a benchmark file.

    ``path`` is relative to the benchmark root (posix), ``task`` the test uid
    (if the problem belongs to one test case), ``field`` a dotted path inside
    the test case / file (``init.<server>.data_patch``, ``tools[3].name``).
    Warnings never make loading fail.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    message: str
    task: str | None = None
    field: str | None = None
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        parts = [p for p in (self.path, self.task, self.field) if p]
        message = self.message if self.is_error else f"warning: {self.message}"
        return ": ".join([*parts, message])


def format_problems(problems: Iterable[Problem]) -> str:
    """One problem per line: ``path: task: field: message`` (empty parts omitted)."""
    return "\n".join(str(p) for p in problems)


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.is_error]


class DatasetError(Exception):
    """A benchmark directory (or one file of it) is unusable; ``problems`` says why."""

    def __init__(self, problems: Iterable[Problem], summary: str | None = None) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        n = len(errors_only(self.problems))
        head = summary or f"{n} problem{'s' if n != 1 else ''} in the benchmark data"
        body = format_problems(self.problems)
        super().__init__(f"{head}\n{body}" if body else head)
