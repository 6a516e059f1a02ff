"""Errors that tell the user what went wrong and what to do about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.container_fate import Fate


class SandboxError(RuntimeError):
    """Base class: every message says what to do next."""


class DockerUnavailableError(SandboxError):
    pass


class ImageMissingError(SandboxError):
    pass


class NetworkPoolExhaustedError(SandboxError):
    pass


class ContainerStartError(SandboxError):
    pass


class ContainerLostError(ContainerStartError):
    """A container of a set ended while the set was being started or prepared, before
    any attempt used it; `fate` says how (`fate.outside`: killed, stopped or removed from
    outside, which a new set may well survive: bench.run.lifecycle replaces such a set)."""

    def __init__(self, message: str, fate: Fate):
        super().__init__(message)
        self.fate = fate


class SeedError(SandboxError):
    pass
