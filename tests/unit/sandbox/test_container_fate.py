"""How a lost container is described (sandbox.container_fate.describe), from `docker inspect` documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker.errors

from sandbox.container_fate import describe, fate_of, lost_fate
from sandbox.oom import cgroup_oom_kills, kernel_logged_oom, oom_killed


def inspected(status: str, code: int = 0, oom: bool = False, memory: int = 512 * 2**20) -> dict[str, Any]:
    return {
        "Id": "0123456789abcdef" * 4,
        "Name": "/eager_hopper",
        "State": {"Status": status, "ExitCode": code, "OOMKilled": oom, "Paused": status == "paused"},
        "HostConfig": {"Memory": memory},
    }


def test_a_running_container_is_not_lost() -> None:
    assert describe("postgres", inspected("running")) is None


def test_the_reason_names_role_name_and_id_and_how_it_ended() -> None:
    who = "its postgres container eager_hopper (0123456789ab)"
    assert describe("postgres", inspected("exited", 137)) == f"{who} exited with code 137 (killed: SIGKILL)"
    assert describe("postgres", inspected("exited", 143)) == f"{who} exited with code 143 (SIGTERM)"
    assert describe("postgres", inspected("exited", 1)) == f"{who} exited with code 1"
    assert describe("postgres", inspected("paused")) == f"{who} is paused"


def test_an_oom_kill_says_so_with_the_limit() -> None:
    told = describe("server-retail", inspected("exited", 137, oom=True, memory=256 * 2**20))
    assert told == (
        "its server-retail container eager_hopper (0123456789ab) was OOM-killed: "
        "it hit its memory limit of 256 MiB (exit code 137)"
    )
    assert "no limit" in (describe("typesense", inspected("exited", 137, oom=True, memory=0)) or "")


def test_the_oom_counter_is_read_for_either_cgroup_version_and_driver(tmp_path: Path) -> None:
    cid = "ab" * 32
    assert cgroup_oom_kills(cid, root=tmp_path) is None  # no cgroup: the container is gone
    layouts = {
        f"memory/docker/{cid}/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",  # v1
        f"system.slice/docker-{cid}.scope/memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",  # v2
        f"unified/custom/{cid}/memory.events": "oom 3\noom_kill 3\n",  # hybrid, --cgroup-parent
    }
    for (path, text), want in zip(layouts.items(), (2, 1, 3), strict=True):
        root = tmp_path / str(want)
        (root / path).parent.mkdir(parents=True)
        (root / path).write_text(text)
        assert cgroup_oom_kills(cid, "/custom" if "custom" in path else "", root=root) == want


def test_the_kernel_log_counts_only_an_oom_kill_in_this_containers_cgroup(tmp_path: Path) -> None:
    cid = "cd" * 32
    log = tmp_path / "kmsg"
    log.write_text(f"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/docker/{'ef' * 32},task=x\n")
    assert not kernel_logged_oom(cid, log)
    log.write_text(f"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/docker/{cid},task=sh,pid=7\n")
    assert kernel_logged_oom(cid, log)
    assert not kernel_logged_oom(cid, tmp_path / "unreadable")


def test_an_exit_other_than_sigkill_is_never_an_oom_kill() -> None:
    # No daemon is asked (the client would fail): only 137 can be the OOM killer's.
    assert not oom_killed(inspected("exited", 1), client=object())
    assert oom_killed(inspected("exited", 137, oom=True), client=object())


class _Forgotten:
    """A daemon that no longer knows the container: no OOM record to be had of it."""

    class api:  # docker.DockerClient's attribute
        @staticmethod
        def inspect_container(cid: str) -> dict[str, Any]:
            raise docker.errors.NotFound(f"no such container: {cid}")


def test_an_end_from_outside_is_told_from_a_crash_and_from_its_own_limit() -> None:
    # docker kill, docker stop: a new set may run where this one could not.
    for code in (137, 143):
        fate = fate_of("server-retail", inspected("exited", code), _Forgotten())
        assert fate is not None and fate.outside and not fate.own_memory_limit
    crashed = fate_of("server-retail", inspected("exited", 1), _Forgotten())
    assert crashed is not None and not crashed.outside
    own_limit = fate_of("server-retail", inspected("exited", 137, oom=True), _Forgotten())
    assert own_limit is not None and own_limit.own_memory_limit and not own_limit.outside
    paused = fate_of("postgres", inspected("paused"), _Forgotten())
    assert paused is not None and not paused.outside
    assert fate_of("postgres", inspected("running"), _Forgotten()) is None
    removed = lost_fate({"postgres": "0123456789abcdef"}, _Forgotten())
    assert removed is not None and removed.outside and "no longer exists" in removed.text
