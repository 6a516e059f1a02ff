"""The task `tbx/thinkingbox_bench`: one sample per benchmark task, each in a tbx attempt
of its own (the `tbx` sandbox environment), the benchmark's conversation as the solver
and tbx's judge as the scorer.

    inspect eval tbx/thinkingbox_bench -T dataset=<checkout> --model <provider/model> --epochs 20
"""

from __future__ import annotations

import os
from pathlib import Path

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.util import SandboxEnvironmentSpec

from bench.dataset import DATASET_ENV
from tbx.config import TbxConfig
from tbx.host import load
from tbx.scorer import end_state, tbx_epochs
from tbx.solver import tbx_conversation


def _names(value: str | list[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    names = tuple(x.strip() for x in items if x.strip())
    return names or None


@task
def thinkingbox_bench(
    dataset: str | None = None,
    release: str | None = None,
    tasks: str | list[str] | None = None,
    domain: str | list[str] | None = None,
    skip_rubrics: bool = False,
    wall_clock: float | None = None,
    warm: int | None = None,
) -> Task:
    """ThinkingBox-Bench (or any tbx benchmark) scored by the database state the agent leaves.

    Args:
      dataset: a benchmark directory: a thinkingbox-data checkout, the demo pack, any tbx
        benchmark (default: $TBX_DATASET).
      release: the release list (default: the benchmark's default release).
      tasks: task ids (comma-separated or a list); default every task of the release.
      domain: only these domains' tasks (comma-separated or a list).
      skip_rubrics: judge rubric tasks on state alone (no `grader` model asked).
      wall_clock: seconds per attempt (default tbx's).
      warm: sandboxes booted ahead per domain (default one per core).
    """
    root = dataset or os.environ.get(DATASET_ENV)
    if not root:
        raise ValueError(
            f"thinkingbox_bench needs a benchmark: -T dataset=<thinkingbox-data checkout or tbx benchmark dir> "
            f"(or ${DATASET_ENV})"
        )
    probe = TbxConfig(dataset=str(Path(root).expanduser().resolve()), release=release)
    bench, selected = load(probe.model_copy(update={"tasks": _names(tasks)}))
    domains = _names(domain)
    if domains is not None:
        unknown = set(domains) - {t.domain for t in bench.tasks}
        if unknown:
            raise ValueError(f"unknown domain(s) {', '.join(sorted(unknown))} in {bench.root}")
        selected = [t for t in selected if t.domain in domains]
    if not selected:
        raise ValueError(f"no task selected in {bench.root}")
    config = TbxConfig(
        dataset=probe.dataset,
        release=release,
        tasks=tuple(t.id for t in selected),
        warm=warm,
        skip_rubrics=skip_rubrics,
        wall_clock=wall_clock if wall_clock is not None else probe.wall_clock,
    )
    spec = SandboxEnvironmentSpec("tbx", config)
    samples = [
        Sample(
            id=t.id,
            input=t.query,
            metadata={"task_id": t.id, "domain": t.domain},
            sandbox=spec,
        )
        for t in selected
    ]
    return Task(
        dataset=MemoryDataset(samples, name=bench.root.name),
        solver=tbx_conversation(),
        scorer=end_state(),
        epochs=Epochs(1, tbx_epochs()),
        sandbox=spec,
    )
