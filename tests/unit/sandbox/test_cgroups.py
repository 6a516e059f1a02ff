"""One table of container cgroup paths (sandbox.cgroups) and tbx's own cgroup
parent (sandbox.cgroup_parent), on fake cgroup trees under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import SandboxError, cgroup_parent, cgroups
from sandbox.cgroups import TBX_PARENT, container_dirs

CID = "c0ffee" * 10


def test_every_layout_is_a_candidate_and_a_known_parent_comes_first(tmp_path: Path) -> None:
    dirs = container_dirs(CID, "cpuacct", parent="/custom", root=tmp_path)
    paths = [str(d.relative_to(tmp_path)) for d, _ in dirs]
    assert paths[0] == f"cpuacct/custom/{CID}"
    for expected in (
        f"cpuacct/{TBX_PARENT}/{CID}",  # v1, tbx's parent
        f"cpu,cpuacct/docker/{CID}",  # v1 co-mounted, Docker's parent
        f"system.slice/docker-{CID}.scope",  # v2, systemd driver
        f"docker/{CID}",  # v2, cgroupfs driver
        f"unified/docker/{CID}",  # the v2 half of a hybrid host
    ):
        assert expected in paths
    versions = dict(zip(paths, (v for _, v in dirs), strict=True))
    assert versions[f"cpuacct/docker/{CID}"] == 1 and versions[f"docker/{CID}"] == 2


def test_a_container_under_tbx_s_parent_is_found_by_the_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox import start_deadline

    group = tmp_path / "cpuacct" / TBX_PARENT / CID
    group.mkdir(parents=True)
    (group / "cpuacct.usage").write_text("2500000000")
    (group / "cgroup.procs").write_text("42\n")
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    assert start_deadline.container_cpu(CID) == 2.5
    assert start_deadline.container_running(CID, seen=True) is True


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", cgroup_parent.PARENT_SHARES), ("0", 0), ("4096", 4096), (" 2 ", 2)],
)
def test_parent_shares_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str, expected: int) -> None:
    monkeypatch.setenv(cgroup_parent.SHARES_ENV, raw)
    assert cgroup_parent.parent_shares() == expected


@pytest.mark.parametrize("raw", ["lots", "1", "300000", "-5"])
def test_a_bad_parent_weight_is_named(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(cgroup_parent.SHARES_ENV, raw)
    with pytest.raises(SandboxError, match=cgroup_parent.SHARES_ENV):
        cgroup_parent.parent_shares()


def test_v1_parent_is_made_with_its_shares(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    assert cgroup_parent._set_up(8192, tmp_path)
    assert (tmp_path / "cpu" / TBX_PARENT / "cpu.shares").read_text() == "8192"


def test_v2_parent_needs_the_cpu_controller_delegated(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    assert not cgroup_parent._set_up(8192, tmp_path)
    assert not (tmp_path / TBX_PARENT).exists()
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert cgroup_parent._set_up(8192, tmp_path)
    assert (tmp_path / TBX_PARENT / "cpu.weight").read_text() == str(cgroup_parent.shares_to_weight(8192))


def test_an_unwritable_tree_means_docker_s_default_parent(tmp_path: Path) -> None:
    (tmp_path / "cpu").write_text("not a directory")  # neither a v1 mount nor v2: nothing to set up
    assert not cgroup_parent._set_up(8192, tmp_path)


def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup_parent, "_decided", {})


def test_no_parent_off_a_remote_daemon_or_the_systemd_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cpu").mkdir()

    class Client:
        driver = "systemd"

        def info(self) -> dict[str, str]:
            return {"CgroupDriver": self.driver}

    monkeypatch.setattr(cgroup_parent, "docker_client", Client)
    monkeypatch.delenv(cgroup_parent.SHARES_ENV, raising=False)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    Client.driver = "cgroupfs"
    _fresh(monkeypatch)
    assert cgroup_parent.attempt_parent(tmp_path) is None  # off unless asked for
    monkeypatch.setenv(cgroup_parent.SHARES_ENV, "8192")
    Client.driver = "systemd"
    _fresh(monkeypatch)
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
    assert cgroup_parent.attempt_parent(tmp_path) is None
    _fresh(monkeypatch)
    monkeypatch.delenv("DOCKER_HOST")
    assert cgroup_parent.attempt_parent(tmp_path) is None  # systemd driver
    _fresh(monkeypatch)
    Client.driver = "cgroupfs"
    assert cgroup_parent.attempt_parent(tmp_path) == "/" + TBX_PARENT
    _fresh(monkeypatch)
    monkeypatch.setenv(cgroup_parent.SHARES_ENV, "0")
    assert cgroup_parent.attempt_parent(tmp_path) is None


def test_a_daemon_away_is_not_decided_for_good(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cpu").mkdir()
    answers: list[Exception | dict[str, str]] = [ConnectionError("daemon away"), {"CgroupDriver": "cgroupfs"}]

    class Client:
        def info(self) -> dict[str, str]:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    monkeypatch.setattr(cgroup_parent, "docker_client", Client)
    monkeypatch.setenv(cgroup_parent.SHARES_ENV, "8192")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    _fresh(monkeypatch)
    assert cgroup_parent.attempt_parent(tmp_path) is None
    assert cgroup_parent.attempt_parent(tmp_path) == "/" + TBX_PARENT
