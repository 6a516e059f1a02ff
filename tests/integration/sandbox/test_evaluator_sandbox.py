"""Test functions in the real evaluator container: normal tests, judge questions relayed
to a host-side stand-in, and hostile tests (a loop, a memory hog, a print flood,
sys.exit, the network, the environment, writes outside /tmp, bad rewards, odd
signatures, leftovers for the next test). All cases run in one module fixture, on a
pool of two warm containers (a new one only where a test's end killed its own)."""

from __future__ import annotations

import asyncio
import os
import textwrap
from typing import Any

import docker
import pytest

from sandbox import labels as lbl
from sandbox import require_image
from sandbox.evaluator import EvaluatorLimits, EvaluatorPool, TestFunctionResult, run_test_function

pytestmark = pytest.mark.docker

SECRET = "tbx-integration-secret-value"
HEADER = "from thinkingbox.common import Judge, TestContext\nfrom thinkingbox.common.chat_types import Text\n"

CONTEXT: dict[str, Any] = {
    "response": "Your trip is cancelled. <DONE>",
    "tool_direct_responses": [],
    "effects": {"srv": {"reservations": {"A1": {"status": "active"}, "Z7": {"status": "cancelled"}}}},
    "tool_calls": [
        {
            "tool_call": {
                "T": "ToolCall",
                "metadata": {"error": None},
                "name": "cancel",
                "arguments": {"id": "Z7"},
                "id": "c1",
            },
            "tool_response": {
                "T": "ToolResponse",
                "metadata": {},
                "name": "cancel",
                "content": '{"ok": true}',
                "id": "c1",
            },
        }
    ],
    "messages": [
        {"T": "Text", "metadata": {}, "role": "system", "content": "sys"},
        {"T": "Text", "metadata": {}, "role": "user", "content": "cancel Z7"},
        {
            "T": "ParallelToolCall",
            "metadata": {},
            "tool_calls": [
                {"T": "ToolCall", "metadata": {}, "name": "cancel", "arguments": {"id": "Z7"}, "id": "c1"}
            ],
        },
        {"T": "ToolResponse", "metadata": {}, "name": "cancel", "content": '{"ok": true}', "id": "c1"},
        {"T": "Text", "metadata": {}, "role": "assistant", "content": "Your trip is cancelled. <DONE>"},
    ],
    "init_result": {"srv": {}},
    "session_id": "s-1",
    "metadata": {},
}

CASES: dict[str, str] = {
    "pass_with_judge": """
        def test_t(x: TestContext, judge: Judge):
            print("calls", len(x.tool_calls), file=None)
            assert x.tool_calls[0].tool_call.arguments.get("id") == "Z7"
            assert isinstance(x.messages[-1], Text) and x.query() == "cancel Z7"
            assert x.transcript(1) == "Assistant: Your trip is cancelled. <DONE>"
            assert judge.text_yesno(x.response, "Is the trip <cancelled>?")
        """,
    "fails_in_helper": """
        def helper(res):
            assert res["status"] == "cancelled", f"status is {res['status']}"
        def test_t(x, judge):
            helper(x.effects["srv"]["reservations"]["A1"])
        """,
    "key_error": """
        def test_t(x, judge):
            x.effects["nope"]
        """,
    "reward_half": "def test_t(x, judge):\n    return 0.5\n",
    "reward_numeric_string": "def test_t(x, judge):\n    return '0.7'\n",
    "reward_two": "def test_t(x, judge):\n    return 2.0\n",
    "reward_abc": "def test_t(x, judge):\n    return 'abc'\n",
    "loop": "def test_t(x, judge):\n    while True:\n        pass\n",
    "memory_hog": """
        def test_t(x, judge):
            hog = []
            while True:
                hog.append(bytearray(16 << 20))
        """,
    "print_flood": "def test_t(x, judge):\n    while True:\n        print('flood' * 100)\n",
    "sys_exit": "import sys\ndef test_t(x, judge):\n    sys.exit(0)\n",
    "os_exit": "import os\ndef test_t(x, judge):\n    os._exit(3)\n",
    "network": """
        import socket
        def test_t(x, judge):
            socket.create_connection(("1.1.1.1", 53), timeout=3)
        """,
    "environment": """
        import os
        def test_t(x, judge):
            print(sorted(os.environ))
            try:
                open("/proc/1/environ").read()  # the supervisor's: out of reach
            except PermissionError:
                print("pid 1 out of reach")
        """,
    "write_outside_tmp": """
        def test_t(x, judge):
            with open("/tmp/ok.txt", "w") as f:
                f.write("fine")
            open("/opt/tbx/lib/evil.py", "w")
        """,
    "no_judge_parameter": "def test_t(x):\n    assert x.response.endswith('<DONE>')\n",
    "extra_parameter_with_default": "def test_t(x, judge, flag=False):\n    assert flag is False\n",
    "extra_parameter_fixture": "def test_t(x, judge, session_client):\n    pass\n",
    "judge_call_cap": "def test_t(x, judge):\n    for _ in range(5):\n        judge.yesno('again?')\n",
}

# Run in this order in one container: what the first leaves behind, the second must not find.
LEAVE_BEHIND = """
    import os, time
    def test_t(x, judge):
        os.makedirs("/tmp/d/e")
        open("/tmp/d/e/secret", "w").write(x.response)
        os.chmod("/tmp/d", 0)
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
    """
LOOK_FOR_LEFTOVERS = """
    import os
    def test_t(x, judge):
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        others = [p for p in pids if p not in (1, os.getpid(), os.getppid())]
        assert others == [], f"other processes: {others}"
        assert os.listdir("/tmp") == []
        try:
            os.listdir(f"/proc/{os.getppid()}/fd")  # the relay's pipes to the container
            raise AssertionError("the relay's fds are in reach")
        except PermissionError:
            pass
    """


def code_of(body: str) -> str:
    return HEADER + textwrap.dedent(body).lstrip("\n") + "__tb_test_fn = test_t\n"


@pytest.fixture(scope="module")
def results() -> dict[str, TestFunctionResult]:
    os.environ["OPENAI_API_KEY"] = SECRET  # present in tbx's process, never in the sandbox
    run = lbl.new_id("evaltest")
    asked: list[tuple[str, str]] = []

    async def ask(system: str, user: str) -> str:
        asked.append((system, user))
        return "Yes."

    limits = EvaluatorLimits(wall_seconds=4.0, memory_bytes=256 << 20, judge_calls=3, prints=64 << 10)

    labels = lbl.labels_for(run, lbl.new_id("pool"), "evaluator", os.getpid())

    async def all_cases() -> dict[str, TestFunctionResult]:
        pool = EvaluatorPool(require_image("evaluator"), labels, size=2, limits=limits)
        try:

            async def one(body: str) -> TestFunctionResult:
                return await run_test_function(code_of(body), CONTEXT, ask=ask, labels=labels, pool=pool)

            done = await asyncio.gather(*(one(b) for b in CASES.values()))
            out = dict(zip(CASES, done, strict=True))
            single = EvaluatorPool(require_image("evaluator"), labels, size=1, limits=limits)
            try:
                out["leave_behind"] = await run_test_function(
                    code_of(LEAVE_BEHIND), CONTEXT, ask=ask, labels=labels, pool=single
                )
                out["look_for_leftovers"] = await run_test_function(
                    code_of(LOOK_FOR_LEFTOVERS), CONTEXT, ask=ask, labels=labels, pool=single
                )
                out["one_shot"] = await run_test_function(
                    code_of(CASES["reward_half"]), CONTEXT, ask=ask, labels=labels, limits=limits
                )
                starts["single"] = single.started
            finally:
                await single.close()
            starts["pool"] = pool.started
            return out
        finally:
            await pool.close()

    starts: dict[str, int] = {}
    out = asyncio.run(all_cases())
    out["starts"] = starts  # type: ignore[assignment]
    left = docker.from_env().containers.list(all=True, filters={"label": f"{lbl.RUN}={run}"})
    assert left == [], "every evaluator container is gone once its test ended"
    return out


def test_a_passing_test_sees_the_context_and_asks_the_judge_through_tbx(
    results: dict[str, TestFunctionResult],
) -> None:
    r = results["pass_with_judge"]
    assert (r.result, r.reward, r.is_system_error) == (True, 1.0, False), r.tb
    assert r.prints == "calls 1\n"
    assert [c.user for c in r.judge_calls] == [
        "<message>\nYour trip is cancelled. &lt;DONE&gt;\n</message>\nIs the trip <cancelled>?"
    ]
    assert r.metadata == {"judge_motivation": None}


def test_an_assert_is_a_failure_at_its_line(results: dict[str, TestFunctionResult]) -> None:
    r = results["fails_in_helper"]
    assert (r.result, r.reward, r.is_system_error) == (False, 0.0, False)
    assert r.lineno == 4 and r.line_content.strip().startswith('assert res["status"] == "cancelled"')
    assert r.message == "status is active"


def test_another_exception_is_the_tests_system_error(results: dict[str, TestFunctionResult]) -> None:
    r = results["key_error"]
    assert (r.result, r.is_system_error, r.cause, r.error_type) == (False, True, "test", "KeyError")
    assert r.lineno == 4 and "x.effects" in r.line_content


def test_rewards(results: dict[str, TestFunctionResult]) -> None:
    assert (results["reward_half"].result, results["reward_half"].reward) == (True, 0.5)
    assert (results["reward_numeric_string"].result, results["reward_numeric_string"].reward) == (True, 0.7)
    for name, shown in (("reward_two", "2.0"), ("reward_abc", "'abc'")):
        r = results[name]
        assert (r.result, r.reward, r.is_system_error, r.cause) == (False, 0.0, True, "test")
        assert r.message == f"the test returned {shown}: a reward must be a number in [0, 1]"


def test_limits_end_a_test_as_its_own_system_error(results: dict[str, TestFunctionResult]) -> None:
    loop, hog, flood = results["loop"], results["memory_hog"], results["print_flood"]
    assert (loop.is_system_error, loop.cause, loop.limit) == (True, "test", "wall clock")
    assert loop.message == "the test ran longer than its wall clock of 4 s and was stopped"
    assert (hog.is_system_error, hog.cause, hog.limit, hog.error_type) == (
        True,
        "test",
        "memory",
        "MemoryError",
    )
    assert (flood.is_system_error, flood.cause, flood.limit) == (True, "test", "prints")
    assert len(flood.prints) <= 64 << 10


def test_exits(results: dict[str, TestFunctionResult]) -> None:
    r = results["sys_exit"]
    assert (r.is_system_error, r.cause, r.lineno) == (True, "test", 5)
    assert r.message == "the test called sys.exit(0)"
    r = results["os_exit"]
    assert (r.is_system_error, r.cause) == (True, "test")
    assert r.message == "the test process ended without a result (exit status 3)"


def test_no_network_no_secret_no_writes(results: dict[str, TestFunctionResult]) -> None:
    net = results["network"]
    assert net.is_system_error and net.error_type in {"OSError", "TimeoutError"}, net.tb
    assert "unreachable" in (net.message or "")
    env = results["environment"]
    assert env.passed, env.tb
    assert env.prints.endswith("pid 1 out of reach\n")
    assert SECRET not in env.prints and "OPENAI_API_KEY" not in env.prints and "TBX" not in env.prints
    write = results["write_outside_tmp"]
    assert (
        write.is_system_error
        and write.error_type == "OSError"
        and "Read-only file system" in (write.message or "")
    )
    assert write.lineno == 6


def test_signatures(results: dict[str, TestFunctionResult]) -> None:
    assert results["no_judge_parameter"].passed
    assert results["extra_parameter_with_default"].passed
    fixture = results["extra_parameter_fixture"]
    assert (fixture.is_system_error, fixture.cause, fixture.error_type) == (True, "test", "TypeError")
    assert fixture.message == (
        "test parameter 'session_client' has no value: tbx passes only x and judge "
        "(fixtures are not supported; give it a default to use one)"
    )


def test_the_judge_relay_is_capped(results: dict[str, TestFunctionResult]) -> None:
    r = results["judge_call_cap"]
    assert (r.is_system_error, r.cause, r.limit) == (True, "test", "judge calls")
    assert len(r.judge_calls) == 4 and r.judge_calls[-1].text is None


def test_a_warm_container_keeps_nothing_of_the_test_before(results: dict[str, TestFunctionResult]) -> None:
    assert results["leave_behind"].passed, results["leave_behind"].tb
    look = results["look_for_leftovers"]
    assert look.passed, look.tb
    starts: dict[str, int] = results["starts"]  # type: ignore[assignment]
    # 19 tests on two warm containers: a third start only if a test came after the looping
    # test's container was killed (its wall clock) while the other was busy.
    assert starts["single"] == 1 and starts["pool"] in (2, 3)
    assert results["one_shot"].reward == 0.5  # a container of its own (--once) gives the same
