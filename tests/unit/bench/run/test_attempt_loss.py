"""Whose doing a lost sandbox was (sandbox.proxy.loss, sandbox.oom, sandbox.container_fate):
its own memory limit hit while a call of the attempt was in flight is the agent's
outcome; anything else (a kill from outside, the host out of memory, a limit hit with no
call near it) is the infrastructure's, a system error."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox import Loss, agent_load
from sandbox.container_fate import Fate, describe, fate_of
from sandbox.oom import cgroup_oom_cause, kernel_oom_cause
from sandbox.proxy.registered import RegisteredAttempt

CID = "ab" * 32
T = 1_800_000_000.0  # when the container ended (epoch seconds)


def own_limit(at: float | None = T) -> Fate:
    return Fate(
        "server-zendesk", "its server-zendesk container was OOM-killed", own_memory_limit=True, ended_at=at
    )


def test_its_own_limit_hit_while_a_call_was_in_flight_is_the_agents() -> None:
    assert agent_load(own_limit(), [(T - 3, None)], tail=60, now=T + 1)  # still in flight
    assert agent_load(own_limit(), [(T - 3, T + 0.01)], tail=60, now=T + 1)  # failed on the kill
    assert agent_load(own_limit(), [(T - 30, T - 20)], tail=60, now=T + 1)  # answered (timed out) before


def test_no_call_near_it_or_not_its_own_limit_is_the_infrastructures() -> None:
    assert not agent_load(own_limit(), [], tail=60, now=T)  # e.g. while booting or seeding
    assert not agent_load(own_limit(), [(T - 200, T - 100)], tail=60, now=T)  # long after the last call
    assert not agent_load(own_limit(), [(T + 10, None)], tail=60, now=T + 11)  # a call to the dead server
    killed = Fate("server-zendesk", "exited with code 137 (killed: SIGKILL)", ended_at=T)  # docker kill
    host = Fate("postgres", "OOM-killed: the host ran out of memory", own_memory_limit=False, ended_at=T)
    for fate in (killed, host, None):
        assert not agent_load(fate, [(T - 1, None)], tail=60, now=T)


def test_without_an_end_time_the_moment_of_the_report_counts() -> None:
    assert agent_load(own_limit(None), [(T - 1, None)], tail=60, now=T)


def test_the_registered_attempt_judges_a_loss_by_its_calls_in_flight() -> None:
    async def judged() -> None:
        attempt = RegisteredAttempt("a1", "digest", 60.0)
        with attempt.sending() as cut:
            loss = attempt.lose("sandbox gone: its server-zendesk container was OOM-killed", own_limit(None))
            await asyncio.sleep(0)
        assert not cut.cancel_called  # its own load: the call ends as it ends, then the refusals
        assert loss == Loss("sandbox gone: its server-zendesk container was OOM-killed", agent_load=True)
        assert attempt.lost() is None and attempt.gone is not None
        idle = RegisteredAttempt("a2", "digest", 60.0)
        assert not idle.lose("sandbox gone: ...", own_limit(None)).agent_load
        assert idle.lost() == "sandbox gone: ...; the attempt cannot go on"  # answered 503

    asyncio.run(judged())


def test_a_loss_of_the_infrastructures_cuts_the_calls_in_flight() -> None:
    """A killed server's network goes with it: a call in flight would get no answer before
    the call bound. The loss cuts it, from the watch's thread as from the call's loop."""

    async def cut_off() -> tuple[bool, float]:
        attempt = RegisteredAttempt("a1", "digest", 60.0)
        loop = asyncio.get_running_loop()
        killed = Fate("server-retail", "its server-retail container exited with code 137", outside=True)
        loop.call_later(0.05, lambda: threading.Thread(target=attempt.lose, args=("gone", killed)).start())
        t = time.monotonic()
        with attempt.sending() as cut:
            await asyncio.sleep(30)  # no answer is coming
        return cut.cancelled_caught and not attempt.in_flight, time.monotonic() - t

    caught, took = asyncio.run(cut_off())
    assert caught and took < 5

    async def after() -> bool:  # a call sent once the loss is known is cut at once
        attempt = RegisteredAttempt("a2", "digest", 60.0)
        attempt.lose("gone", None)
        with attempt.sending() as cut:
            await asyncio.sleep(30)
        return cut.cancelled_caught

    assert asyncio.run(after())


def test_the_kernel_line_tells_the_containers_own_limit_from_the_hosts(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    log.write_text(
        f"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/docker/{CID},task_memcg=/docker/{CID},task=python\n"
    )
    assert kernel_oom_cause(CID, log) == "limit"
    log.write_text(
        f"6,1,2,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),task_memcg=/docker/{CID},task=python\n"
    )
    assert kernel_oom_cause(CID, log) == "host"
    log.write_text("6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/docker/other\n")
    assert kernel_oom_cause(CID, log) is None


def test_the_cgroup_counters_tell_them_apart_in_either_version(tmp_path: Path) -> None:
    def layout(name: str, files: dict[str, str]) -> Path:
        root = tmp_path / name
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        return root

    v1 = f"memory/docker/{CID}"
    limit_v1 = layout("l1", {f"{v1}/memory.oom_control": "oom_kill 1\n", f"{v1}/memory.failcnt": "12\n"})
    host_v1 = layout("h1", {f"{v1}/memory.oom_control": "oom_kill 1\n", f"{v1}/memory.failcnt": "0\n"})
    v2 = f"system.slice/docker-{CID}.scope/memory.events"
    limit_v2 = layout("l2", {v2: "max 9\noom 1\noom_kill 1\n"})
    host_v2 = layout("h2", {v2: "max 0\noom 0\noom_kill 1\n"})
    none = layout("n", {v2: "oom 0\noom_kill 0\n"})
    assert cgroup_oom_cause(CID, root=limit_v1) == "limit"
    assert cgroup_oom_cause(CID, root=host_v1) == "host"
    assert cgroup_oom_cause(CID, root=limit_v2) == "limit"
    assert cgroup_oom_cause(CID, root=host_v2) == "host"
    assert cgroup_oom_cause(CID, root=none) is None


def inspected(code: int, oom: bool, finished: str = "2027-01-15T08:00:00.123456789Z") -> dict[str, Any]:
    return {
        "Id": CID,
        "Name": "/tbx-server",
        "State": {"Status": "exited", "ExitCode": code, "OOMKilled": oom, "FinishedAt": finished},
        "HostConfig": {"Memory": 64 * 2**20},
    }


def test_a_fate_carries_its_own_limit_and_when_it_ended() -> None:
    class NoDaemon:  # the flag says OOM; the kernel's and the cgroup's records are not there
        api = None

    fate = fate_of("server-zendesk", inspected(137, oom=True), NoDaemon())
    assert fate is not None and fate.own_memory_limit
    assert fate.ended_at == datetime(2027, 1, 15, 8, 0, 0, 123456, tzinfo=UTC).timestamp()
    assert "hit its memory limit of 64 MiB" in fate.text
    stopped = fate_of("server-zendesk", inspected(143, oom=False), NoDaemon())
    assert stopped is not None and not stopped.own_memory_limit


def test_a_host_wide_oom_kill_says_it_was_not_the_containers_limit() -> None:
    told = describe("postgres", inspected(137, oom=False), "host")
    assert told is not None and "the host ran out of memory (not its own limit of 64 MiB)" in told


def test_a_limit_verdict_fails_with_its_signature_with_or_without_a_state() -> None:
    from judge import GoldenState, Verdict, limit_verdict

    golden = GoldenState(
        task_id="t", key="k", initial_state={}, final_state={}, initial_hash="i", golden_hash="g"
    )
    bare = limit_verdict("t", golden, "sandbox gone: OOM-killed", None)
    assert not bare.passed and bare.signature == "resource_limit" and bare.differences == []
    assert bare.resource_limit == "sandbox gone: OOM-killed" and "OOM-killed" in bare.summary()
    matched = Verdict(
        task_id="t", passed=True, strict=True, terminal_hash="g", golden_hash="g", initial_hash="i"
    )
    over = limit_verdict("t", golden, "limit", matched)
    assert not over.passed and over.strict and over.signature == "resource_limit"  # the state kept beside it
