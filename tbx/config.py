"""The `tbx` sandbox environment's configuration: which benchmark, and the limits an attempt
runs under. It travels in each sample's `SandboxEnvironmentSpec`, so Inspect hands it to
`task_init`, `sample_init` and the cleanups, and one value keys the host they share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bench.defaults import CALL_TIMEOUT, WALL_CLOCK


class TbxConfig(BaseModel):
    """`dataset`: a benchmark directory (a thinkingbox-data checkout, the demo pack, any tbx
    benchmark), resolved to an absolute path; `release`: its release list (None: the
    default); `tasks`: the selected task ids (None: the release's); `warm`: sandboxes
    booted ahead per domain (None: one per core)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str
    release: str | None = None
    tasks: tuple[str, ...] | None = None
    warm: int | None = Field(default=None, ge=0)
    wall_clock: float = Field(default=WALL_CLOCK, gt=0)
    call_timeout: float = Field(default=CALL_TIMEOUT, gt=0)
    skip_rubrics: bool = False
    runtime: str | None = None  # container runtime (e.g. runsc), as `tbx run --runtime`
    golden_cache: str | None = None
