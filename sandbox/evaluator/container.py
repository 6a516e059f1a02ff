"""Run one task test function in a container of its own, and relay its judge questions.

    result = await run_test_function(code, context, ask=ask, labels=labels)

The container (image `evaluator`) has no network, a read-only root with a small /tmp,
a non-root user without capabilities, CPU, memory and pids limits, and nothing in its
environment or files but the image's: the test sees its own request and nothing of
another attempt. tbx talks to the worker over the container's stdin/stdout
(images/evaluator/worker.py has the line protocol); a judge question is answered by
`ask(system, user)` on the host, so the judge's key never enters the sandbox. The
test's own time is bounded by a wall clock that stops while a question waits on the
model; past it the container is killed. Every way a test can end is a
`TestFunctionResult`; only a failure to run the container at all raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sandbox.errors import SandboxError
from sandbox.evaluator.models import EvaluatorLimits, JudgeCall, Limit, TestFunctionResult
from sandbox.faults import CONTAINER_FAULT
from sandbox.images import require_image
from sandbox.labels import new_id

Ask = Callable[[str, str], Awaitable[str]]
IMAGE = "evaluator"
USER = "10001:10001"
STDERR_KEPT = 8192
REWARD_RANGE = "a reward must be a number in [0, 1]"


def docker_args(name: str, image: str, limits: EvaluatorLimits, labels: dict[str, str]) -> list[str]:
    args = [
        "docker", "run", "-i", "--rm", "--name", name,
        "--network", "none",
        "--read-only",
        "--tmpfs", f"/tmp:rw,nosuid,nodev,noexec,size={limits.tmp_bytes}",
        "--user", USER,
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--memory", limits.container_memory,
        "--memory-swap", limits.container_memory,
        "--pids-limit", str(limits.pids),
        "--cpus", str(limits.cpus),
        "--ulimit", "nofile=256:256",
        "--log-driver", "none",
    ]  # fmt: skip
    for key, value in labels.items():
        args += ["--label", f"{key}={value}"]
    return [*args, image]


def system_error(message: str, cause: str, limit: Limit | None = None, **extra: Any) -> TestFunctionResult:
    return TestFunctionResult(
        result=False,
        reward=0.0,
        is_system_error=True,
        tb=message,
        line_content="",
        message=message,
        cause=cause,  # type: ignore[arg-type]
        limit=limit,
        **extra,
    )


def checked_reward(raw: Any) -> tuple[float | None, str | None]:
    """The reward a test returned, or why it is not one (spec §4.2: None gives 1.0; a
    bool, a number or a numeric string in [0, 1] is taken; anything else is refused)."""
    if raw is None:
        return 1.0, None
    if isinstance(raw, bool):
        return float(raw), None
    value: float | None = None
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        with contextlib.suppress(ValueError):
            value = float(raw)
    if value is None or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        shown = raw.get("unsupported", "an object") if isinstance(raw, dict) else repr(raw)
        return None, f"the test returned {shown}: {REWARD_RANGE}"
    return value, None


class _Relay:
    """The host end of one worker's protocol."""

    def __init__(self, proc: asyncio.subprocess.Process, ask: Ask | None, limits: EvaluatorLimits):
        self.proc = proc
        self.ask = ask
        self.limits = limits
        self.calls: list[JudgeCall] = []
        self.judge_seconds = 0.0
        self.judge_failed = False

    async def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(obj, ensure_ascii=False) + "\n").encode())
        await self.proc.stdin.drain()

    async def answer(self, question: Any) -> None:
        if not isinstance(question, dict):
            await self.send({"error": "malformed judge question", "cause": "test"})
            return
        system, user = str(question.get("system", "")), str(question.get("user", ""))
        call = JudgeCall(system=system[:2000], user=user[:20000])
        refused = None
        if len(self.calls) >= self.limits.judge_calls:
            refused = f"judge calls limit: the test asked more than {self.limits.judge_calls} questions"
        elif len(system) + len(user) > self.limits.judge_text:
            refused = f"judge text limit: a question of {len(system) + len(user)} characters (at most {self.limits.judge_text})"
        elif self.ask is None:
            refused = "no judge: the run names no judge role (add one to grade tests that ask the judge)"
        self.calls.append(call)
        if refused is not None:
            call.error = refused
            await self.send({"error": refused, "cause": "test" if self.ask is not None else "judge"})
            return
        assert self.ask is not None
        start = time.monotonic()
        try:
            text = await self.ask(system, user)
        except Exception as exc:  # the model's failure is the judge's, told to the test
            self.judge_failed = True
            call.error = f"{type(exc).__name__}: {exc}"
            await self.send({"error": call.error, "cause": "judge"})
            return
        finally:
            call.seconds = time.monotonic() - start
            self.judge_seconds += call.seconds
        call.text = text
        await self.send({"text": text})


async def _kill(name: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "docker", "kill", name, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await proc.wait()


def _from_worker(raw: Any, relay: _Relay, started: float) -> TestFunctionResult:
    if not isinstance(raw, dict):
        return system_error("the test process sent a malformed result", "test", "protocol")
    reward, refused = checked_reward(raw.get("reward"))
    fields = {k: v for k, v in raw.items() if k not in ("reward", "judge_calls", "seconds")}
    try:
        result = TestFunctionResult(reward=reward if reward is not None else 0.0, **fields)
    except ValueError as exc:
        return system_error(f"the test process sent a malformed result: {exc}", "test", "protocol")
    update: dict[str, Any] = {"judge_calls": relay.calls, "seconds": time.monotonic() - started}
    if refused is not None and not result.is_system_error and result.result:
        update |= {
            "result": False,
            "reward": 0.0,
            "is_system_error": True,
            "cause": "test",
            "message": refused,
            "tb": refused,
        }
    if relay.judge_failed and not (result.result and not result.is_system_error):
        update |= {"is_system_error": True, "cause": "judge"}
    if (
        any(c.error and c.error.startswith("judge calls limit") for c in relay.calls)
        and result.is_system_error
    ):
        update["limit"] = "judge calls"
    elif (
        any(c.error and c.error.startswith("judge text limit") for c in relay.calls)
        and result.is_system_error
    ):
        update["limit"] = "judge text"
    return result.model_copy(update=update)


async def run_test_function(
    code: str,
    context: dict[str, Any],
    *,
    ask: Ask | None,
    labels: dict[str, str],
    judge_type: str = "legacy",
    uid: str | None = None,
    limits: EvaluatorLimits | None = None,
    image: str | None = None,
) -> TestFunctionResult:
    """Run `code` (a test's code string, bench.dataset.pyfile) on `context` (the
    TestContext as JSON) in a fresh evaluator container."""
    limits = limits or EvaluatorLimits()
    image = image or require_image(IMAGE)
    name = new_id("tbx-eval")
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *docker_args(name, image, limits, labels),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=limits.line_bytes,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr_task = asyncio.ensure_future(_tail(proc.stderr))
    relay = _Relay(proc, ask, limits)
    killed: Limit | None = None
    outcome: TestFunctionResult | None = None
    try:
        request = {
            "code": code,
            "context": context,
            "judge_type": judge_type,
            "uid": uid,
            "limits": {"prints": limits.prints, "memory_bytes": limits.memory_bytes},
        }
        try:
            ready = await asyncio.wait_for(proc.stdout.readline(), timeout=limits.start_seconds)
        except TimeoutError:
            ready = b""
        if ready.strip() != b'{"ready": true}':
            if ready:
                raise EvaluatorUnavailable(
                    f"the evaluator container did not start as expected: {ready[:200]!r}"
                )
            await _kill(name)
            code_ = await proc.wait()
            raise EvaluatorUnavailable(
                f"the evaluator container did not start within {limits.start_seconds:g} s (exit {code_}): "
                f"{(await stderr_task).strip()[-2000:]}"
            )
        started = time.monotonic()
        with contextlib.suppress(ConnectionError):
            await relay.send(request)
        while outcome is None:
            remaining = limits.wall_seconds - (time.monotonic() - started - relay.judge_seconds)
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), timeout=max(remaining, 0.0))
            except TimeoutError:
                killed = "wall clock"
                break
            except ValueError:  # a line over the cap (asyncio's LimitOverrunError)
                killed = "protocol"
                break
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                killed = "protocol"
                break
            if isinstance(msg, dict) and "judge" in msg:
                with contextlib.suppress(ConnectionError):
                    await relay.answer(msg["judge"])
            elif isinstance(msg, dict) and "result" in msg:
                outcome = _from_worker(msg["result"], relay, started)
            else:
                killed = "protocol"
                break
    finally:
        if outcome is None and proc.returncode is None:
            await _kill(name)
        if proc.stdin is not None:
            proc.stdin.close()
        code_ = await proc.wait()
        stderr = await stderr_task
    if outcome is not None:
        return outcome
    seconds = time.monotonic() - started
    if killed == "wall clock":
        msg = f"the test ran longer than its wall clock of {limits.wall_seconds:g} s and was stopped"
        return system_error(msg, "test", "wall clock", judge_calls=relay.calls, seconds=seconds)
    if killed == "protocol":
        msg = (
            "the test process wrote outside the evaluator's protocol (or a line over its cap) and was stopped"
        )
        return system_error(msg, "test", "protocol", judge_calls=relay.calls, seconds=seconds)
    if code_ == 137:
        msg = f"the test process was killed (SIGKILL): past its container's memory limit of {limits.container_memory}"
        return system_error(msg, "test", "memory", judge_calls=relay.calls, seconds=seconds)
    msg = f"the test process ended without a result (exit status {code_})" + (
        f": {stderr.strip()[-2000:]}" if stderr.strip() else ""
    )
    return system_error(msg, "test", judge_calls=relay.calls, seconds=seconds)


async def _tail(stream: asyncio.StreamReader) -> str:
    """The last bytes of a stream, read to its end (a flood is drained, not kept)."""
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-STDERR_KEPT:]
    return kept.decode("utf-8", "replace")


class EvaluatorUnavailable(SandboxError):
    """The evaluator container could not be started (Docker, the image): not the test's
    fault; a container fault as any other sandbox's."""

    fault = CONTAINER_FAULT
