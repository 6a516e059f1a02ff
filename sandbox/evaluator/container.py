"""Run task test functions in evaluator containers, and relay their judge questions.

    result = await run_test_function(code, context, ask=ask, labels=labels)            # a container of its own
    pool = EvaluatorPool(image, labels); result = await run_test_function(..., pool=pool)  # a warm one

The container (image `evaluator`) has no network, a read-only root with a small /tmp,
a non-root user without capabilities, CPU, memory and pids limits, and nothing in its
environment or files but the image's. A warm container serves one test at a time,
each in processes forked for it from a supervisor that never reads a request, and
is wiped between tests (every other process killed, /tmp emptied): a test sees its
own request and nothing of another attempt. tbx talks to the worker over the
container's stdin/stdout (images/evaluator/worker.py has the line protocol); a judge
question is answered by `ask(system, user)` on the host, so the judge's key never
enters the sandbox. The test's own time is bounded by a wall clock that stops while a
question waits on the model; past it the container is killed (a pool starts another).
Every way a test can end is a `TestFunctionResult`; only a failure to start the
container at all raises (EvaluatorUnavailable).
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
PRINTS_KEPT = 64 << 10  # of a test's prints, what its result (and the attempt record) keeps
REWARD_RANGE = "a reward must be a number in [0, 1]"
NO_JUDGE = "no judge: the run names no judge role"


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
            refused = f"{NO_JUDGE} (add one to grade tests that ask the judge)"
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
    prints = fields.get("prints")
    if isinstance(prints, str) and len(prints) > PRINTS_KEPT:  # the record keeps the tail
        fields["prints"] = (
            f"[{len(prints) - PRINTS_KEPT} characters before these left out]\n" + prints[-PRINTS_KEPT:]
        )
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


class EvaluatorContainer:
    """One evaluator container: started with `start`, it runs tests one at a time
    (`run`); a test that overran its wall clock or broke the protocol ends it
    (`alive` False). `once`: the worker serves one test and exits."""

    def __init__(self, image: str, limits: EvaluatorLimits, labels: dict[str, str], *, once: bool = False):
        self.image = image
        self.limits = limits
        self.labels = labels
        self.once = once
        self.name = new_id("tbx-eval")
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr: asyncio.Future[str] | None = None
        self.alive = False

    async def start(self) -> None:
        """Run the container and wait for its worker's first `ready` (EvaluatorUnavailable
        when it does not come within `start_seconds`)."""
        args = docker_args(self.name, self.image, self.limits, self.labels)
        self.proc = await asyncio.create_subprocess_exec(
            *args,
            *(["--once"] if self.once else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=self.limits.line_bytes,
        )
        assert self.proc.stderr is not None
        self._stderr = asyncio.ensure_future(_tail(self.proc.stderr))
        try:
            line = await self._line(self.limits.start_seconds)
        except TimeoutError:
            line = None
        if line != {"ready": True}:
            await self.close()
            stderr = (await self._stderr).strip()[-2000:]
            raise EvaluatorUnavailable(
                f"the evaluator container did not start within {self.limits.start_seconds:g} s "
                f"(exit {self.proc.returncode}): {stderr or line}"
            )
        self.alive = True

    async def _line(self, timeout: float) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout=max(timeout, 0.0))
        if not raw:
            return None
        return json.loads(raw)

    async def run(self, request: dict[str, Any], ask: Ask | None) -> TestFunctionResult:
        """One test on a ready container; it is ready again after unless it died."""
        assert self.proc is not None and self.alive
        relay = _Relay(self.proc, ask, self.limits)
        started = time.monotonic()
        outcome: TestFunctionResult | None = None
        ended: Any = None
        done = False
        killed: Limit | None = None
        try:
            await relay.send(request)
            while True:
                remaining = self.limits.wall_seconds - (time.monotonic() - started - relay.judge_seconds)
                msg = await self._line(remaining)
                if not isinstance(msg, dict):  # the container ended (None) or wrote a non-object
                    killed = None if msg is None else "protocol"
                    break
                if "judge" in msg and outcome is None:
                    await relay.answer(msg["judge"])
                elif "result" in msg and outcome is None:
                    outcome = _from_worker(msg["result"], relay, started)
                elif "ended" in msg:
                    ended = msg["ended"]
                elif "done" in msg:
                    done = True
                    break
                else:
                    killed = "protocol"
                    break
            if killed is not None or not done or self.once:
                self.alive = False
            else:  # ready again: the next test's wall clock starts from here
                self.alive = await self._line(self.limits.start_seconds) == {"ready": True}
        except TimeoutError:
            killed = "wall clock"
            self.alive = False
        except (ValueError, ConnectionError):  # a line over the cap, not JSON, a closed pipe
            killed = "protocol"
            self.alive = False
        finally:
            if not self.alive:
                await self.close()
        if outcome is not None:
            return outcome
        seconds = time.monotonic() - started
        calls = relay.calls
        if killed == "wall clock":
            msg = f"the test ran longer than its wall clock of {self.limits.wall_seconds:g} s and was stopped"
            return system_error(msg, "test", "wall clock", judge_calls=calls, seconds=seconds)
        if killed == "protocol" or isinstance(ended, str):
            why = (
                ended if isinstance(ended, str) else "the test process wrote outside the evaluator's protocol"
            )
            return system_error(
                f"{why} and was stopped", "test", "protocol", judge_calls=calls, seconds=seconds
            )
        if ended in (-9, 137) or (ended is None and self.proc is not None and self.proc.returncode == 137):
            msg = (
                "the test process was killed (SIGKILL): past its container's memory limit of "
                f"{self.limits.container_memory}"
            )
            return system_error(msg, "test", "memory", judge_calls=calls, seconds=seconds)
        stderr = (
            (await self._stderr).strip()[-2000:] if self._stderr is not None and self._stderr.done() else ""
        )
        status = ended if ended is not None else (self.proc.returncode if self.proc else None)
        msg = f"the test process ended without a result (exit status {status})" + (
            f": {stderr}" if stderr else ""
        )
        return system_error(msg, "test", judge_calls=calls, seconds=seconds)

    async def close(self) -> None:
        """End the container (its stdin closed; killed if it does not end at once)."""
        self.alive = False
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        if proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), timeout=2.0)
            except TimeoutError:
                await _kill(self.name)
                await proc.wait()
        if self._stderr is not None:
            await self._stderr


class EvaluatorPool:
    """Warm evaluator containers for one run: each serves tests one after another (a
    clean slate between them, images/evaluator/worker.py), at most `size` at once.
    `close()` ends them all."""

    def __init__(
        self, image: str, labels: dict[str, str], *, size: int = 16, limits: EvaluatorLimits | None = None
    ):
        self.image = image
        self.labels = labels
        self.limits = limits or EvaluatorLimits()
        self._idle: list[EvaluatorContainer] = []
        self._all: set[EvaluatorContainer] = set()
        self._gate = asyncio.Semaphore(size)
        self.started = 0

    async def run(self, request: dict[str, Any], ask: Ask | None) -> TestFunctionResult:
        async with self._gate:
            box = self._idle.pop() if self._idle else None
            if box is None:
                box = EvaluatorContainer(self.image, self.limits, self.labels)
                self._all.add(box)
                self.started += 1
                await box.start()
            try:
                return await box.run(request, ask)
            finally:
                if box.alive:
                    self._idle.append(box)
                else:
                    self._all.discard(box)

    async def close(self) -> None:
        boxes, self._all, self._idle = list(self._all), set(), []
        await asyncio.gather(*(b.close() for b in boxes), return_exceptions=True)


def request_of(
    code: str, context: dict[str, Any], limits: EvaluatorLimits, judge_type: str, uid: str | None
) -> dict[str, Any]:
    return {
        "code": code,
        "context": context,
        "judge_type": judge_type,
        "uid": uid,
        "limits": {"prints": limits.prints, "memory_bytes": limits.memory_bytes},
    }


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
    pool: EvaluatorPool | None = None,
) -> TestFunctionResult:
    """Run `code` (a test's code string, bench.dataset.pyfile) on `context` (the
    TestContext as JSON): in a warm container of `pool`, else in a container of its own."""
    if pool is not None:
        return await pool.run(request_of(code, context, pool.limits, judge_type, uid), ask)
    limits = limits or EvaluatorLimits()
    box = EvaluatorContainer(image or require_image(IMAGE), limits, labels, once=True)
    await box.start()
    try:
        return await box.run(request_of(code, context, limits, judge_type, uid), ask)
    finally:
        await box.close()


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
