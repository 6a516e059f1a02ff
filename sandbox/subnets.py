"""Private subnets for attempt networks, from an address range tbx owns.

Every attempt network gets an explicit /27 out of `TBX_SUBNET_RANGE` (default
10.213.0.0/16: 2048 networks), checked against the subnets of existing Docker
networks and the host's routes. Docker's own default address pools (~31
networks on a stock daemon) are never used, so density needs no daemon
configuration. Inside a subnet the layout is fixed: .1 the bridge (host), then
one static address per service in start order, and the last host address is a
DNS sink nothing ever holds: containers' only resolver upstream, so a name
lookup dies on the attempt's own bridge (an unanswered ARP request) instead of
being forwarded anywhere (docs/sandbox.md, "No name resolution").
"""

from __future__ import annotations

import ipaddress
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import docker
import docker.errors

from sandbox.errors import NetworkPoolExhaustedError

RANGE_ENV = "TBX_SUBNET_RANGE"
DEFAULT_RANGE = "10.213.0.0/16"
PREFIX = 27
MAX_TRIES = 32  # concurrent creators racing for the same free subnet retry this often
T = TypeVar("T")


@dataclass(frozen=True)
class AttemptSubnet:
    network: ipaddress.IPv4Network

    @property
    def subnet(self) -> str:
        return str(self.network)

    @property
    def gateway(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def dns_sink(self) -> str:
        return str(self.network.broadcast_address - 1)

    @property
    def capacity(self) -> int:
        """How many services fit: all host addresses but the gateway and the DNS sink."""
        return self.network.num_addresses - 4

    def address(self, index: int) -> str:
        """The static address of the index-th service (0-based)."""
        if not 0 <= index < self.capacity:
            raise ValueError(f"service #{index} does not fit in {self.network} ({self.capacity} addresses)")
        return str(self.network.network_address + 2 + index)


def tbx_range() -> ipaddress.IPv4Network:
    text = os.environ.get(RANGE_ENV, DEFAULT_RANGE)
    try:
        net = ipaddress.IPv4Network(text)
    except ValueError as exc:
        raise NetworkPoolExhaustedError(f"{RANGE_ENV}={text!r} is not an IPv4 network ({exc})") from None
    if not net.is_private or net.prefixlen > PREFIX:
        raise NetworkPoolExhaustedError(
            f"{RANGE_ENV}={text} must be a private IPv4 range of at least one /{PREFIX} (e.g. {DEFAULT_RANGE})"
        )
    return net


def host_routes(path: Path = Path("/proc/net/route")) -> list[ipaddress.IPv4Network]:
    """Destinations of the host's IPv4 routes, the default route excepted."""
    routes = []
    try:
        lines = path.read_text().splitlines()[1:]
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        dest = ipaddress.IPv4Address(int(fields[1], 16).to_bytes(4, "little"))
        mask = ipaddress.IPv4Address(int(fields[7], 16).to_bytes(4, "little"))
        net = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
        if net.prefixlen:
            routes.append(net)
    return routes


def docker_subnets(client: docker.DockerClient) -> list[ipaddress.IPv4Network]:
    """Subnets of every Docker network on the daemon (any owner)."""
    nets = []
    for n in client.networks.list():
        for cfg in (n.attrs.get("IPAM") or {}).get("Config") or []:
            try:
                net = ipaddress.ip_network(cfg.get("Subnet", ""), strict=False)
            except ValueError:
                continue
            if isinstance(net, ipaddress.IPv4Network):
                nets.append(net)
    return nets


def free_subnets(
    taken: Iterable[ipaddress.IPv4Network], within: ipaddress.IPv4Network | None = None
) -> list[ipaddress.IPv4Network]:
    within = within or tbx_range()
    taken = [t for t in taken if t.overlaps(within)]
    return [s for s in within.subnets(new_prefix=PREFIX) if not any(s.overlaps(t) for t in taken)]


RANDOM_PICKS = 64  # random draws before listing every free subnet of the range


def pick_free(
    taken: Iterable[ipaddress.IPv4Network],
    within: ipaddress.IPv4Network,
    tried: set[ipaddress.IPv4Network] = frozenset(),  # type: ignore[assignment]
) -> ipaddress.IPv4Network | None:
    """A random free subnet of `within` not in `tried`, or None when none is left. Draws
    at random first: listing all of a /16's 2048 subnets against every taken one (one
    check per pair) cost each sandbox start tens of ms of CPU (py-spy, in
    benchmarks/attempt_cpu.py); the list is only made when draws keep hitting taken ones."""
    taken = [t for t in taken if t.overlaps(within)]
    size = 2 ** (32 - PREFIX)
    count = within.num_addresses // size
    base = int(within.network_address)
    for _ in range(RANDOM_PICKS):
        s = ipaddress.IPv4Network((base + random.randrange(count) * size, PREFIX))
        if s not in tried and not any(s.overlaps(t) for t in taken):
            return s
    free = [s for s in free_subnets(taken, within) if s not in tried]
    return random.choice(free) if free else None


def _overlap(exc: docker.errors.APIError) -> bool:
    text = str(exc).lower()
    return "overlap" in text or "address already in use" in text


def with_subnet(client: docker.DockerClient, create: Callable[[AttemptSubnet], T]) -> T:
    """`create(subnet)` with a free subnet of the tbx range; a subnet another process
    took in the meantime (Docker answers "overlaps") is retried with another one."""
    within = tbx_range()
    tried: set[ipaddress.IPv4Network] = set()
    for _ in range(MAX_TRIES):
        # A random free subnet: processes starting attempts at once rarely pick the same one.
        choice = pick_free([*docker_subnets(client), *host_routes()], within, tried)
        if choice is None:
            break
        tried.add(choice)
        try:
            return create(AttemptSubnet(choice))
        except docker.errors.APIError as exc:
            if not _overlap(exc):
                raise
    in_use = within.num_addresses // (2 ** (32 - PREFIX))
    raise NetworkPoolExhaustedError(
        f"no free /{PREFIX} subnet left in tbx's address range {within} ({in_use} subnets, all used by "
        "Docker networks or host routes): run `tbx gc` to remove orphaned tbx networks, lower the "
        f"concurrency, or give tbx a larger or another private range with {RANGE_ENV} (e.g. "
        f"{RANGE_ENV}=10.214.0.0/15)"
    )
