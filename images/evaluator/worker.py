"""Run one task test function and say how it ended (the evaluator sandbox's entrypoint).

Line protocol on the container's stdin/stdout, one JSON object a line:
  worker -> tbx   {"ready": true}                 once it runs
  tbx -> worker   the request: {"code", "context", "judge_type", "uid", "limits"}
  worker -> tbx   {"judge": {"system", "user"}}   a judge question; tbx answers with
  tbx -> worker   {"text": ...} or {"error": ..., "cause": "judge" | "test"}
  worker -> tbx   {"result": {...}}               how the test ended, or
  worker -> tbx   {"ended": exit status | why}     the test's process ended without one
  worker -> tbx   {"done": status}                the test is over, its processes gone
then `ready` again for the next test (a warm container serves one test at a time,
each in processes forked for it, with a clean slate between them: main()).

The test's own output never reaches the protocol: fd 1 and 2 point at /dev/null
while it runs, `print` and sys.stdout/sys.stderr write into a bounded buffer
(`prints`); past the cap the test ends (OutputLimit, a BaseException a test
cannot catch by `except Exception`). Standard library only.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import resource
import shutil
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
    """One end of a line stream: `out` to write, `inp` to read."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self.out = os.fdopen(out_fd, "w", encoding="utf-8", closefd=False)
        self.inp = os.fdopen(in_fd, "r", encoding="utf-8", closefd=False)

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
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))  # room to report a MemoryError
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


NO_REQUEST = 3  # the relay's exit status when tbx closed the stream instead of sending a test
MAX_LINE = 16 << 20


def set_dumpable(on: bool) -> None:
    """PR_SET_DUMPABLE: off, a process's /proc files and memory are out of reach of
    other processes of the same user (ptrace, /proc/<pid>/fd, /mem, /environ)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, int(on), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def test_process(to_test: int, from_test: int) -> None:
    """The process the test code runs in: it holds only its two pipes to the relay
    (not the container's stdin/stdout), so it can neither read another request nor
    write the protocol."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, to_test)
    os.closerange(to_test + 1, from_test)
    os.closerange(from_test + 1, 1 << 16)
    set_dumpable(True)  # its own /proc for its own introspection; no other test is alive
    proto = Protocol(from_test, to_test)
    line = proto.inp.readline()
    if line:
        proto.send({"result": run(json.loads(line), proto)})
    os._exit(0)


def relay(container: Protocol) -> int:
    """One test: fork its process before reading anything, hand it the request, carry
    its judge questions and result to tbx. Returns the relay's exit status."""
    set_dumpable(False)
    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            test_process(req_r, res_w)
        finally:
            os._exit(1)
    os.close(req_r)
    os.close(res_w)
    test = Protocol(req_w, res_r)
    line = container.inp.readline()
    if not line:
        os.kill(pid, 9)
        return NO_REQUEST
    test.out.write(line)
    test.out.flush()
    while True:
        msg_line = test.inp.readline(MAX_LINE)
        if not msg_line:  # the test process ended without a result
            _, status = os.waitpid(pid, 0)
            container.send({"ended": os.waitstatus_to_exitcode(status)})
            return 0
        try:
            msg = json.loads(msg_line)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and "judge" in msg:
            container.send({"judge": msg["judge"]})
            answer = container.inp.readline()
            if not answer:
                os.kill(pid, 9)
                return NO_REQUEST
            try:
                test.out.write(answer)
                test.out.flush()
            except BrokenPipeError:
                pass
        elif isinstance(msg, dict) and "result" in msg:
            container.send({"result": msg["result"]})
            return 0
        else:
            os.kill(pid, 9)
            container.send({"ended": "the test process broke the relay's protocol"})
            return 0


def clean_slate() -> None:
    """After a test: every other process of the container killed and reaped, /tmp emptied."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, 9)  # all processes this user may signal but this one (pid 1)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    for root, dirs, _ in os.walk("/tmp"):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, d), 0o700)
    for name in os.listdir("/tmp"):
        path = os.path.join("/tmp", name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def main() -> None:
    """Serve tests one after another (`--once`: one). The supervisor (pid 1) never reads
    a request: each test gets a relay forked from it, and the relay forks the test's
    process before it reads anything, so nothing of one test is in another's memory;
    between tests every other process is killed and /tmp emptied."""
    once = "--once" in sys.argv
    set_dumpable(False)
    container = Protocol(os.dup(1), 0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    while True:
        container.send({"ready": True})  # tbx starts a test's wall clock here, not at docker run
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = relay(container)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        clean_slate()
        if code == NO_REQUEST:
            return
        container.send({"done": code})
        if once:
            return


if __name__ == "__main__":
    main()
