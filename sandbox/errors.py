"""Errors that tell the user what went wrong and what to do about it."""

from __future__ import annotations


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


class SeedError(SandboxError):
    pass
