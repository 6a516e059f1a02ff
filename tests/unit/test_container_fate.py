"""How a lost container is described (sandbox.container_fate.describe), from `docker inspect` documents."""

from __future__ import annotations

from typing import Any

from sandbox.container_fate import describe


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
