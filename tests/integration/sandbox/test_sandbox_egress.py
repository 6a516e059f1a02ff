"""No egress: an attempt's containers reach each other and nothing else, and
nothing of theirs is published on the host."""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from sandbox import labels as lbl

pytestmark = pytest.mark.docker


def _bash_connect(dexec: Any, container: str, host: str, port: int) -> tuple[int, str]:
    """For images without python: bash's /dev/tcp, bounded by a 2 s timeout (exit 124)."""
    return dexec(container, ["timeout", "2", "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"])


def test_no_route_to_other_networks(sandbox_pair: Any, dexec: Any, outside: tuple[str, int]) -> None:
    a = sandbox_pair.a
    server, pg = a.containers["server-retail"], a.containers["postgres"]
    assert dexec.connect_errno(server, a.pg.host, 5432) == 0  # the probe itself works
    assert dexec.connect_errno(server, *outside) != 0
    code, _ = _bash_connect(dexec, pg, *outside)
    assert code != 0
    code, out = _bash_connect(dexec, pg, a.pg.host, 5432)
    assert code == 0, out  # same probe, own network: connects


def test_network_is_internal_and_nothing_is_published(
    sandbox_pair: Any, dclient: docker.DockerClient
) -> None:
    for handle in (sandbox_pair.a, sandbox_pair.b):
        net = dclient.networks.get(handle.network)
        assert net.attrs["Internal"] is True
        assert net.attrs["Labels"][lbl.ATTEMPT] == handle.attempt_id
        attached = set(net.attrs["Containers"])
        assert attached == set(handle.containers.values())
        for role, cid in handle.containers.items():
            c = dclient.containers.get(cid)
            assert c.labels[lbl.RUN] == handle.run_id and c.labels[lbl.ROLE] == role
            assert list(c.attrs["NetworkSettings"]["Networks"]) == [handle.network], role
            bound = {p: b for p, b in (c.attrs["NetworkSettings"]["Ports"] or {}).items() if b}
            assert bound == {}, f"{role} publishes {bound}"
            assert not c.attrs["HostConfig"]["PortBindings"], role
            assert c.attrs["HostConfig"]["PublishAllPorts"] is False, role
            assert c.attrs["HostConfig"]["NetworkMode"] == handle.network, role


def _interface_ip(name: str) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()))  # SIOCGIFADDR
    return socket.inet_ntoa(packed[20:24])


@contextlib.contextmanager
def _listener(ip: str) -> Iterator[int]:
    srv = socket.socket()
    srv.bind((ip, 0))
    srv.listen(4)
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


def test_host_services_are_not_reachable_from_an_attempt(
    sandbox_pair: Any, dexec: Any, dclient: docker.DockerClient
) -> None:
    """Docker 20.10 gives containers of an internal network a default route to the
    bridge's gateway, which is the host: without `sandbox.host_firewall`'s INPUT rule a
    listener on the gateway or docker0 address is reachable from every attempt."""
    a = sandbox_pair.a
    gateway = dclient.networks.get(a.network).attrs["IPAM"]["Config"][0]["Gateway"]
    docker0 = _interface_ip("docker0")
    server = a.containers["server-retail"]
    reached = []
    for ip in (gateway, docker0):
        with _listener(ip) as port:
            if dexec.connect_errno(server, ip, port) == 0:
                reached.append(f"{ip}:{port}")
    assert reached == [], f"attempt container reached host listeners at {reached}"
