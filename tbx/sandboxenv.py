"""The `tbx` sandbox environment: each Inspect sample is one tbx attempt.

    task_init      TaskHost started for the configuration (benchmark loaded, provider
                   with its warm pools, tool proxy, golden store)
    sample_init    the sample's attempt opened through the one lifecycle
                   (bench.run.held.HeldAttempt around bench.run.lifecycle.open_attempt:
                   checkout, prepared initial state, tool proxy registration)
    (solver)       the conversation against the attempt's MCP endpoint, then `end`:
                   unregistered, the loss check, terminal dump, teardown
    (scorer)       tbx's judge on the outcome (tbx.scorer)
    sample_cleanup the attempt closed, whatever ended the sample (no terminal dump then)
    task_cleanup   the host closed, and whatever the run left swept

The environment runs no commands and holds no files: its tools are the attempt's MCP
tools (`endpoint`), so `exec`, `read_file` and `write_file` raise
SandboxUnavailableError. A lost container, a dead server or a Docker outage raise from
the lifecycle (sandbox.SandboxError, bench.run.held.SandboxLost): Inspect's sample
errors, which `--retry-on-error` retries in a fresh attempt; never a score.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, overload

from inspect_ai.util import (
    ExecResult,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    sandboxenv,
)
from inspect_ai.util._sandbox.environment import SandboxUnavailableError
from pydantic import BaseModel

from bench.dataset import Task
from bench.rollout.trajectory import Trajectory
from bench.run.attempt import AttemptOutcome
from bench.run.held import HeldAttempt
from bench.run.sizing import default_concurrency
from tbx.config import TbxConfig
from tbx.host import TaskHost

NO_COMMANDS = "a tbx sandbox runs no commands and holds no files: its tools are the attempt's MCP tools"


class SampleEnded(RuntimeError):
    """The sample ended (an error, a cancellation, a limit) before its attempt did."""


def tbx_config(config: SandboxEnvironmentConfigType | None) -> TbxConfig:
    if isinstance(config, TbxConfig):
        return config
    if isinstance(config, dict):
        return TbxConfig.model_validate(config)
    raise ValueError(
        f"the tbx sandbox needs a TbxConfig (the task tbx/thinkingbox_bench makes one), got {config!r}"
    )


# One host per configuration, for the tasks of the eval that use it.
_hosts: dict[TbxConfig, TaskHost] = {}
_starting: dict[TbxConfig, asyncio.Lock] = {}


async def host_for(config: TbxConfig) -> TaskHost:
    lock = _starting.setdefault(config, asyncio.Lock())
    async with lock:
        host = _hosts.get(config)
        if host is None:
            host = TaskHost(config)
            try:
                await host.start()
            except BaseException:
                await host.close()
                raise
            _hosts[config] = host
        return host


class Attempt:
    """One sample's attempt: its task, the held attempt and, once the conversation is
    over, its trajectory (the scorer reads both)."""

    def __init__(self, host: TaskHost, task: Task, held: HeldAttempt):
        self.host = host
        self.task = task
        self.held = held
        self.trajectory: Trajectory | None = None

    @property
    def outcome(self) -> AttemptOutcome:
        return self.held.outcome

    @property
    def endpoint(self) -> tuple[str, dict[str, str]]:
        """The attempt's MCP endpoint on the tool proxy: URL and headers (bearer token)."""
        live = self.held.live
        return live.url, dict(live.headers)

    async def end(self, error: BaseException | None = None) -> None:
        """End the attempt (the first end decides; later ones wait): unregistered, terminal
        state dumped unless `error`, torn down. Raises how it ended unless cleanly (a lost
        sandbox, the attempt's own limit: bench.run.held)."""
        await self.held.end(error)


@sandboxenv(name="tbx")
class TbxSandbox(SandboxEnvironment):
    """See the module doc."""

    def __init__(self, attempt: Attempt):
        super().__init__()
        self.attempt = attempt

    # ---- the sample's lifecycle -----------------------------------------------------
    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        await host_for(tbx_config(config))

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        host = await host_for(tbx_config(config))
        task = host.task(metadata["task_id"])
        held = await host.open(task)
        return {"default": cls(Attempt(host, task, held))}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            if isinstance(env, TbxSandbox):
                # a no-op when the solver or the scorer ended it; else no terminal state is taken
                await env.attempt.held.close(SampleEnded("the sample ended before its attempt did"))

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        host = _hosts.pop(tbx_config(config), None)
        if host is not None:
            await host.close()

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return TbxConfig.model_validate(config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        """Inspect's default --max-sandboxes: `tbx run`'s default for a model agent (memory)."""
        return default_concurrency(model_agent=True)

    # ---- no commands, no files --------------------------------------------------------
    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        raise SandboxUnavailableError(NO_COMMANDS)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        raise SandboxUnavailableError(NO_COMMANDS)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        raise SandboxUnavailableError(NO_COMMANDS)
