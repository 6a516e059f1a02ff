"""One place to get a Docker client, with a clear error when there is none."""

from __future__ import annotations

import functools

import docker
import docker.errors

from sandbox.errors import DockerUnavailableError


@functools.cache
def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        raise DockerUnavailableError(
            "cannot reach the Docker daemon "
            f"({exc.__class__.__name__}: {exc}). Start it (e.g. `sudo service docker start` or "
            "`dockerd &`) or set DOCKER_HOST, then retry."
        ) from exc
    return client
