"""The start timeout counts time without CPU progress (`sandbox.start_deadline`): a
container still using CPU keeps its wait going up to the hard cap, one that
uses none times out after `timeout`, and an unreadable cgroup means the plain
wall-clock deadline. The cgroup reader is replaced; the deadline logic runs as is."""

from __future__ import annotations

import pytest

import sandbox.cgroups as cgroups
import sandbox.start_deadline as start_deadline
from sandbox.start_deadline import HARD_CAP, StartDeadline


def _cpu(values: list[float | None]) -> object:
    it = iter(values)
    return lambda cid: next(it)


def test_a_busy_container_keeps_its_wait_up_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start_deadline, "container_cpu", _cpu([0.0] + [0.1 * i for i in range(1, 1000)]))
    wait = StartDeadline(0.0, 10.0, "c")
    for now in range(0, 200):
        if wait.expired(float(now)):
            break
        wait.look(float(now))
    assert now == pytest.approx(HARD_CAP * 10.0)


def test_an_idle_container_times_out_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Busy for 3 s, then no CPU at all: 10 s after the last progress it is over.
    monkeypatch.setattr(start_deadline, "container_cpu", _cpu([0.0, 0.5, 1.0, 1.5] + [1.5] * 100))
    wait = StartDeadline(0.0, 10.0, "c")
    now = 0.0
    while not wait.expired(now):
        now += 1.0
        wait.look(now)
    assert now == pytest.approx(13.0)


def test_without_a_readable_cgroup_the_deadline_is_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start_deadline, "container_cpu", lambda cid: None)
    wait = StartDeadline(0.0, 10.0, "c")
    wait.look(5.0)
    assert not wait.expired(9.9) and wait.expired(10.0)


def test_container_running_reads_the_cgroup_and_says_when_it_cannot_tell(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    group = tmp_path / "cpuacct" / "docker" / "abc"
    # No cgroup of that layout: the host cannot tell (the caller asks the daemon) ...
    assert start_deadline.container_running("abc", seen=False) is None
    group.mkdir(parents=True)
    (group / "cpuacct.usage").write_text("5\n")
    (group / "cgroup.procs").write_text("123\n456\n")
    assert start_deadline.container_running("abc", seen=False) is True
    (group / "cgroup.procs").write_text("")  # its processes exited
    assert start_deadline.container_running("abc", seen=True) is False
    for f in group.iterdir():
        f.unlink()
    group.rmdir()
    # ... but a cgroup that was there and is gone means the container ended.
    assert start_deadline.container_running("abc", seen=True) is False
