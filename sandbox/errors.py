"""Errors that tell the user what went wrong and what to do about it; each says in
its `fault` which part of the system failed (sandbox.faults)."""

from __future__ import annotations

from sandbox.faults import CONTAINER_FAULT, NODE_FAULT, OTHER_FAULT, Fate, Fault


class SandboxError(RuntimeError):
    """Base class: every message says what to do next."""

    fault: Fault = OTHER_FAULT


class DockerUnavailableError(SandboxError):
    fault = NODE_FAULT


class ImageMissingError(SandboxError):
    fault = NODE_FAULT


class NetworkPoolExhaustedError(SandboxError):
    fault = NODE_FAULT


class ContainerStartError(SandboxError):
    fault = CONTAINER_FAULT


class ContainerLostError(ContainerStartError):
    """A container of a set ended while the set was being started or prepared, before
    any attempt used it; `fate` says how (`fate.outside`: killed, stopped or removed from
    outside, which a new set may well survive: bench.run.lifecycle replaces such a set)."""

    def __init__(self, message: str, fate: Fate):
        super().__init__(message)
        self.fate = fate


class SeedError(SandboxError):
    fault = CONTAINER_FAULT


class CheckoutTimeout(SandboxError):
    """No sandbox was handed over within the checkout's wait (`DockerProvider`'s
    `checkout_timeout`): the provider is at capacity (every spare taken, boots queued or
    slow), nothing of the attempt has started. A server refuses the request as at
    capacity and the client retries (`tbx env serve`: CAPACITY_REACHED; the Session API:
    503 with Retry-After); `tbx run` tries the attempt again (retryable, `other` as every
    sandbox error without a cause of its own). `waited`: the seconds waited."""

    def __init__(self, message: str, waited: float):
        super().__init__(message)
        self.waited = waited

    def __reduce__(self) -> tuple[object, ...]:
        return CheckoutTimeout, (str(self), self.waited)


class CheckoutServerError(SandboxError):
    """A checkout's server (servers/servers.yaml) cannot run: its package folder, its
    dependencies, its image, its start or its init (a bad world state). The message names
    the server and what failed; a new try would fail the same way."""

    fault = Fault("other", retryable=False)
