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
