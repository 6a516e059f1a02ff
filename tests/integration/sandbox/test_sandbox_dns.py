"""No name resolution from attempt containers, and attempt networks from tbx's own
address range: explicit subnets (>= 128 networks at once without touching the
daemon's address pools), static addresses, peers by IP, and a resolver upstream
that is an unassigned address of the attempt's own subnet."""

from __future__ import annotations

import ipaddress
import itertools
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import docker
import pytest

from sandbox import NetworkPoolExhaustedError
from sandbox import labels as lbl
from sandbox.subnets import RANGE_ENV, AttemptSubnet, tbx_range, with_subnet

pytestmark = pytest.mark.docker

ETH_P_ALL = 0x0003
# getaddrinfo of each name; prints the outcome (an address would be a failure of the test).
LOOKUP = (
    "import socket,sys,time\n"
    "for name in sys.argv[1:]:\n"
    "    t=time.monotonic()\n"
    "    try:\n"
    "        print('resolved', name, socket.getaddrinfo(name, 80))\n"
    "    except socket.gaierror as e:\n"
    "        print('failed', name, e.errno, round(time.monotonic()-t, 1))\n"
)


class Capture:
    """Every frame on every interface of the host's network namespace (bridges, veths,
    the uplink, loopback) while it runs: where a forwarded DNS query would show."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.settimeout(0.2)
        self.frames: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.frames.append(self.sock.recv(65535))
            except TimeoutError:
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def seen(self, needle: bytes) -> bool:
        return any(needle in f for f in self.frames)


def test_lookups_from_inside_fail_and_no_query_leaves(
    sandbox_pair: Any, dclient: docker.DockerClient, dexec: Any
) -> None:
    handle = sandbox_pair.a
    net = dclient.networks.get(handle.network)
    subnet = ipaddress.IPv4Network(net.attrs["IPAM"]["Config"][0]["Subnet"])
    assert subnet.subnet_of(tbx_range())
    addresses = set()
    for role, cid in handle.containers.items():
        attrs = dclient.containers.get(cid).attrs
        ip = attrs["NetworkSettings"]["Networks"][handle.network]["IPAddress"]
        addresses.add(ip)
        # The only resolver upstream is an address of the attempt's own subnet that nothing holds.
        (dns,) = attrs["HostConfig"]["Dns"]
        assert ipaddress.IPv4Address(dns) in subnet and dns == AttemptSubnet(subnet).dns_sink, role
        # Peers by address, never by name: no aliases to resolve.
        assert not (attrs["NetworkSettings"]["Networks"][handle.network].get("Aliases") or [])[1:], role
    assert AttemptSubnet(subnet).dns_sink not in addresses
    env = dclient.containers.get(handle.containers["server-retail"]).attrs["Config"]["Env"]
    dsn = next(e for e in env if e.startswith("TBX_PG_DSN="))
    assert f"host={handle.pg.host}" in dsn

    canary = f"tbx-canary-{secrets.token_hex(6)}"
    control = f"tbx-control-{secrets.token_hex(6)}"
    capture = Capture()
    try:
        time.sleep(0.2)
        # positive control: the capture sees a datagram carrying a name on loopback
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(control.encode(), ("127.0.0.1", 9))
        code, out = dexec(
            handle.containers["server-retail"],
            ["python", "-c", LOOKUP, f"{canary}.invalid", canary, f"{canary}.example.com."],
        )
        time.sleep(0.5)
    finally:
        capture.stop()
    assert code == 0, out
    lines = out.splitlines()
    assert len(lines) == 3 and all(line.startswith("failed") for line in lines), out
    assert capture.seen(control.encode()), "the capture saw nothing: it cannot vouch for the test"
    assert not capture.seen(canary.encode()), "a lookup from inside left the container's network"


@pytest.fixture
def network_run(dclient: docker.DockerClient) -> Iterator[str]:
    run = lbl.new_id("run-it-nets")
    yield run
    for n in dclient.networks.list(filters={"label": f"{lbl.RUN}={run}"}):
        n.remove()


def _create(client: docker.DockerClient, run: str) -> Any:
    def create(subnet: AttemptSubnet) -> Any:
        ipam = docker.types.IPAMConfig(
            pool_configs=[docker.types.IPAMPool(subnet=subnet.subnet, gateway=subnet.gateway)]
        )
        labels = lbl.labels_for(run, lbl.new_id("att"), "network", 0)
        return client.networks.create(lbl.new_id("tbx-net-test"), internal=True, ipam=ipam, labels=labels)

    return with_subnet(client, create)


def test_128_attempt_networks_at_once(dclient: docker.DockerClient, network_run: str) -> None:
    """Created concurrently (so creators race for subnets and retry), all in tbx's
    range, pairwise disjoint; Docker's default pools would stop at ~31."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        nets = list(pool.map(lambda _: _create(dclient, network_run), range(128)))
    subnets = [ipaddress.IPv4Network(n.attrs["IPAM"]["Config"][0]["Subnet"]) for n in nets]
    assert len(subnets) == 128 and len(set(subnets)) == 128
    assert all(s.subnet_of(tbx_range()) for s in subnets)
    ordered = sorted(subnets)
    assert all(not a.overlaps(b) for a, b in itertools.pairwise(ordered))


def test_an_exhausted_range_is_a_clear_error(
    dclient: docker.DockerClient, network_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RANGE_ENV, "10.212.255.192/26")  # room for two /27 networks
    _create(dclient, network_run)
    _create(dclient, network_run)
    with pytest.raises(NetworkPoolExhaustedError, match=f"tbx gc.*{RANGE_ENV}="):
        _create(dclient, network_run)
