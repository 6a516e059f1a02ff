"""Live progress of `tbx run`: a rich panel on a terminal, plain lines elsewhere.

The panel redraws from the coordinator's counters a few times a second (so
"sandboxes alive" moves while attempts are still running); finished attempts
that failed or errored are printed above it, passes only counted. Without a
terminal (CI logs, `2> file`) every finished attempt is one plain line.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Protocol

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from bench.report.views import CANONICAL
from bench.terminal_text import printable


class RunState(Protocol):
    """What the run coordinator exposes for progress reporting."""

    @property
    def counts(self) -> dict[str, int]: ...

    total: int
    started: float
    phase: str


def eta_seconds(done: int, total: int, elapsed: float) -> float | None:
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    return elapsed / done * (total - done)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def nodes_text(state: RunState) -> str | None:
    """`nodes 2 alive: ab12cd34 1 running/5 done, ...` on a Ray cluster, else None."""
    nodes = getattr(state, "nodes", None)
    if nodes is None:
        return None
    parts = [f"{n} {c['running']} running/{c['done']} done" for n, c in sorted(nodes.items())]
    return f"nodes {len(nodes)} alive: " + (", ".join(parts) or "none")


def scored(counts: dict[str, int]) -> int:
    """The attempts the pass rate so far is over: in the canonical view (bench.report.views)
    an attempt whose system error outlasted its retries is a failed one."""
    errors = counts["errors"] if CANONICAL.counts_errors_as_failures else 0
    return counts["passed"] + counts["failed"] + errors


def status_line(state: RunState, now: float | None = None) -> str:
    """One line with everything the live panel shows (the plain-text form)."""
    c = state.counts
    judged = scored(c)
    elapsed = (now or time.monotonic()) - state.started
    rate = f"{c['passed'] / judged:.0%}" if judged else "-"
    line = (
        f"[{c['done']}/{state.total}] pass {rate} ({c['passed']}/{judged} {CANONICAL}) errors {c['errors']} "
        f"retried {c.get('retried', 0)} "
        f"alive {c['alive']}+{getattr(state, 'warm_sandboxes', 0)} warm elapsed {_clock(elapsed)} eta {_clock(eta_seconds(c['done'], state.total, elapsed))}"
    )
    judge_errors = getattr(state, "judge_errors", 0)
    if judge_errors:  # unreadable judge replies: failed rubrics, but not the agent's "no"
        line += f" judge errors {judge_errors}"
    nodes = nodes_text(state)
    return line if nodes is None else f"{line} {nodes}"


class RunProgress:
    """Callable the coordinator invokes after each attempt; `with` it around the run."""

    def __init__(self, stream: IO[str] | None = None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.console = Console(file=self.stream, highlight=False)
        self.live = self.console.is_terminal if live is None else live
        self.state: RunState | None = None
        self._live: Live | None = None

    def attach(self, state: RunState) -> RunProgress:
        self.state = state
        return self

    def __enter__(self) -> RunProgress:
        if self.live:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def __call__(self, state: RunState, task: Any, repeat: int, summary: str) -> None:
        self.state = state
        line = printable(f"{task.id} #{repeat}: {summary[:200]}")  # ids and error texts: recorded data
        if self._live is None:
            print(f"{status_line(state)} | {line}", file=self.stream, flush=True)
        elif not summary.startswith("pass"):  # Verdict.summary() of a pass is "pass"
            style = "red" if summary.startswith("system error") else "yellow"
            self.console.print(Text(line, style=style))

    def __rich__(self) -> RenderableType:
        state = self.state
        if state is None or not getattr(state, "total", 0):
            phase = getattr(state, "phase", "starting") if state is not None else "starting"
            return Text(f"tbx run: {phase}…")
        c = state.counts
        judged = scored(c)
        elapsed = time.monotonic() - state.started
        table = Table.grid(padding=(0, 2))
        table.add_row(
            ProgressBar(total=state.total, completed=c["done"], width=40),
            Text(f"{c['done']}/{state.total} attempts", style="bold"),
        )
        figures = Table.grid(padding=(0, 3))
        figures.add_row(
            Text(f"pass {c['passed'] / judged:.1%} ({CANONICAL})" if judged else "pass -", style="green"),
            Text(f"failed {c['failed']}", style="yellow"),
            Text(f"system errors {c['errors']}", style="red" if c["errors"] else ""),
            Text(f"tries retried {c.get('retried', 0)}", style="yellow" if c.get("retried") else ""),
            Text(f"judge errors {getattr(state, 'judge_errors', 0)}", style="red")
            if getattr(state, "judge_errors", 0)
            else Text(""),
            Text(f"sandboxes alive {c['alive']} (+{getattr(state, 'warm_sandboxes', 0)} warm)"),
            Text(f"elapsed {_clock(elapsed)}"),
            Text(f"eta {_clock(eta_seconds(c['done'], state.total, elapsed))}"),
        )
        nodes = nodes_text(state)
        parts: list[RenderableType] = [Text(f"tbx run: {state.phase}", style="dim"), table, figures]
        if nodes is not None:
            parts.append(Text(nodes, style="cyan"))
        return Group(*parts)
