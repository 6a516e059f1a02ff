"""Raising a set's CPU weight at checkout (`sandbox.cpu_weight`): written to the
container's cgroup where the host shows one (v1 shares, v2 weight), asked of
Docker otherwise, and a container already gone is no error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker.errors
import pytest

import sandbox.cgroups as cgroups
import sandbox.cpu_weight as cpu_weight


def test_v1_shares_and_v2_weight_are_written_to_the_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    v1 = tmp_path / "cpu" / "docker" / "aaa"
    v2 = tmp_path / "system.slice" / "docker-bbb.scope"
    for d, f in ((v1, "cpu.shares"), (v2, "cpu.weight")):
        d.mkdir(parents=True)
        (d / f).write_text("1")
    monkeypatch.setattr(cpu_weight, "docker_client", lambda: pytest.fail("no daemon call needed"))
    cpu_weight.raise_to_running(["aaa", "bbb"])
    assert (v1 / "cpu.shares").read_text() == str(cpu_weight.RUNNING_SHARES)
    assert (v2 / "cpu.weight").read_text() == "39" == str(cpu_weight.shares_to_weight(1024))
    assert cpu_weight.shares_to_weight(2) == 1 and cpu_weight.shares_to_weight(262144) == 10000


def test_without_a_cgroup_docker_is_asked_and_a_gone_container_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    asked: list[tuple[str, int]] = []

    class Api:
        def update_container(self, cid: str, cpu_shares: int) -> None:
            if cid == "gone":
                raise docker.errors.NotFound("no such container")
            asked.append((cid, cpu_shares))

    class Client:
        api = Api()

    client: Any = Client()
    monkeypatch.setattr(cpu_weight, "docker_client", lambda: client)
    cpu_weight.raise_to_running(["gone", "ccc"])
    assert asked == [("ccc", cpu_weight.RUNNING_SHARES)]
