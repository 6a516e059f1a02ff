"""Run one task test function and say how it ended (the evaluator sandbox's entrypoint).

Line protocol on the container's stdin/stdout, one JSON object a line:
  worker -> tbx   {"ready": true}                 once it runs
  tbx -> worker   the request: {"code", "context", "judge_type", "uid", "limits"}
  worker -> tbx   {"judge": {"system", "user"}}   a judge question; tbx answers with
  tbx -> worker   {"text": ...} or {"error": ..., "cause": "judge" | "test"}
  worker -> tbx   {"result": {...}}               the last line

The test's own output never reaches the protocol: fd 1 and 2 point at /dev/null
while it runs, `print` and sys.stdout/sys.stderr write into a bounded buffer
(`prints`); past the cap the test ends (OutputLimit, a BaseException a test
cannot catch by `except Exception`). Standard library only.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import resource
import sys
import traceback
from typing import Any

sys.path.insert(0, "/opt/tbx/lib")

from thinkingbox.common import Judge, TestContext
from thinkingbox.common.judge import JudgeException

FILENAME = "<string>"
CALL = "\n__tb_test_reward = __tb_test_fn(**__tb_test_kwargs)"
NOT_FOUND = "<source not available>"


class OutputLimit(BaseException):
    """The test printed more than its cap."""


class Sink(io.TextIOBase):
    """A bounded text buffer standing in for print, sys.stdout and sys.stderr."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        self.size += len(text)
        if self.size > self.cap:
            raise OutputLimit(f"the test printed more than {self.cap} characters")
        self.parts.append(text)
        return len(text)

    def writable(self) -> bool:
        return True

    def text(self) -> str:
        return "".join(self.parts)


class Protocol:
    def __init__(self) -> None:
        self.out = os.fdopen(os.dup(1), "w", encoding="utf-8")
        self.inp = sys.stdin

    def send(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()

    def ask(self, system: str, user: str) -> str:
        self.send({"judge": {"system": system, "user": user}})
        line = self.inp.readline()
        if not line:
            raise JudgeException("tbx closed the judge relay")
        reply = json.loads(line)
        if "error" in reply:
            raise JudgeException(str(reply["error"]), cause=str(reply.get("cause") or "judge"))
        return str(reply.get("text") or "")


def silence_fds() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def kwargs_for(fn: Any, x: TestContext, judge: Judge) -> dict[str, Any]:
    """The arguments by name: `x` and `judge` when the function declares them; any other
    parameter must have a default (fixtures are not supported: a clear error)."""
    out: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name == "x":
            out[name] = x
        elif name == "judge":
            out[name] = judge
        elif param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.default is not param.empty:
            continue
        else:
            raise TypeError(
                f"test parameter {name!r} has no value: tbx passes only x and judge "
                "(fixtures are not supported; give it a default to use one)"
            )
    return out


def failing_line(exc: BaseException, lines: list[str]) -> tuple[int, str]:
    """The deepest traceback frame inside the test code, and its source line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME]
    if not frames:
        return -1, NOT_FOUND
    n = frames[-1].lineno or -1
    return n, lines[n - 1] if 0 < n <= len(lines) else NOT_FOUND


def reward_of(value: Any) -> Any:
    """The returned value as JSON: numbers, bools and strings as they are (tbx checks the
    range); anything else named by its type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"unsupported": type(value).__name__}


def run(request: dict[str, Any], proto: Protocol) -> dict[str, Any]:
    limits = request.get("limits") or {}
    sink = Sink(int(limits.get("prints", 1 << 20)))
    code = str(request["code"])
    x = TestContext.from_json(request.get("context") or {})
    judge = Judge(proto.ask, request.get("judge_type") or "legacy")

    def capture(
        *args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False
    ) -> None:
        sink.write((" " if sep is None else sep).join(map(str, args)) + ("\n" if end is None else end))

    env: dict[str, Any] = {"print": capture, "__name__": "_tb_dbg_string", "__tb_test_reward": None}
    # The call is compiled on its own, padded so its line number is the one it has in
    # the code string plus the call line: the arguments are chosen once the code has
    # bound __tb_test_fn.
    call = compile("\n" * code.count("\n") + CALL, FILENAME, "exec")
    code = code + CALL
    lines = code.split("\n")
    out: dict[str, Any] = {
        "result": True,
        "reward": None,
        "is_system_error": False,
        "tb": "",
        "lineno": -1,
        "line_content": "",
    }
    memory = int(limits.get("memory_bytes", 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, hard))
    sys.stdout = sys.stderr = sink
    try:
        exec(compile(str(request["code"]), FILENAME, "exec"), env, env)
        env["__tb_test_kwargs"] = kwargs_for(env["__tb_test_fn"], x, judge)
        exec(call, env, env)
        out["reward"] = reward_of(env.get("__tb_test_reward"))
    except BaseException as exc:  # every way a test can end is reported
        out["result"] = False
        out["reward"] = 0.0
        out["is_system_error"] = not isinstance(exc, AssertionError)
        out["tb"] = "".join(traceback.format_exception(exc))[-65536:]
        out["lineno"], out["line_content"] = failing_line(exc, lines)
        out["error_type"] = type(exc).__name__
        out["message"] = str(exc)[:4096]
        if isinstance(exc, OutputLimit):
            out["limit"] = "prints"
        elif isinstance(exc, MemoryError):
            out["limit"] = "memory"
        elif isinstance(exc, SystemExit):
            out["message"] = f"the test called sys.exit({exc.code!r})"
        out["cause"] = exc.cause if isinstance(exc, JudgeException) else "test"
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    out["prints"] = sink.text()
    decisions = judge.drain_decisions()
    metadata = dict(x.metadata) if isinstance(x.metadata, dict) else {}
    try:
        json.dumps(metadata)
    except (TypeError, ValueError):
        metadata = {"unserialisable": repr(metadata)[:4096]}
    out["metadata"] = {**metadata, "judge_motivation": decisions or None}
    return out


def main() -> None:
    proto = Protocol()
    silence_fds()
    proto.send({"ready": True})  # tbx starts the test's wall clock here, not at docker run
    request = json.loads(proto.inp.readline())
    proto.send({"result": run(request, proto)})


if __name__ == "__main__":
    main()
