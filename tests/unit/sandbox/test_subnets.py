"""sandbox.subnets without Docker: the host's routing table and the choice of free subnets."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from sandbox import NetworkPoolExhaustedError
from sandbox.subnets import RANGE_ENV, AttemptSubnet, free_subnets, host_routes, pick_free, tbx_range

ROUTES = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
vpn0\t0020D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""


def test_host_routes_parse_proc_net_route(tmp_path: Path) -> None:
    path = tmp_path / "route"
    path.write_text(ROUTES)
    assert host_routes(path) == [
        ipaddress.IPv4Network("172.17.0.0/16"),
        ipaddress.IPv4Network("10.213.32.0/24"),
    ]
    assert host_routes(tmp_path / "missing") == []


def test_free_subnets_skip_what_docker_or_a_route_holds() -> None:
    within = ipaddress.IPv4Network("10.213.32.0/25")  # four /27
    taken = [ipaddress.IPv4Network("10.213.32.0/27"), ipaddress.IPv4Network("10.213.32.64/28")]
    assert [str(s) for s in free_subnets(taken, within)] == ["10.213.32.32/27", "10.213.32.96/27"]
    assert free_subnets([ipaddress.IPv4Network("10.0.0.0/8")], within) == []


def test_pick_free_finds_the_one_free_subnet_and_nothing_taken_or_tried() -> None:
    within = ipaddress.IPv4Network("10.213.0.0/20")  # 128 /27
    subnets = list(within.subnets(new_prefix=27))
    free = subnets[77]
    taken = [s for s in subnets if s != free]
    assert pick_free(taken, within) == free  # the listing after the random draws miss
    assert pick_free(taken, within, {free}) is None
    assert pick_free([ipaddress.IPv4Network("10.0.0.0/8")], within) is None
    picks = {pick_free(taken[:64], within) for _ in range(200)}
    assert picks and all(p is not None and p in subnets[64:] for p in picks)
    assert len(picks) > 1  # random: processes starting at once rarely collide


def test_subnet_layout() -> None:
    sub = AttemptSubnet(ipaddress.IPv4Network("10.213.0.32/27"))
    assert (sub.gateway, sub.address(0), sub.dns_sink) == ("10.213.0.33", "10.213.0.34", "10.213.0.62")
    assert sub.address(sub.capacity - 1) == "10.213.0.61"
    with pytest.raises(ValueError):
        sub.address(sub.capacity)


def test_range_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RANGE_ENV, "8.8.0.0/16")
    with pytest.raises(NetworkPoolExhaustedError, match="private"):
        tbx_range()
    monkeypatch.setenv(RANGE_ENV, "10.1.0.0/28")
    with pytest.raises(NetworkPoolExhaustedError, match="/27"):
        tbx_range()
