"""One place to get a Docker client, with a clear error when there is none, and
the removals that are safe to retry."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import docker
import docker.errors
import requests
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from sandbox.backoff import exponential_backoff
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


# Removing a container or a network is idempotent, so a transient refusal is
# worth another try: the daemon busy (5xx), a removal already in progress or a
# network whose endpoints are still being detached (409/403), a dropped
# connection. "Not found" means it is gone already.
REMOVE_ATTEMPTS = 4
REMOVE_WAIT_MAX = 2.0  # seconds


def _transient_docker_error(exc: BaseException) -> bool:
    if isinstance(exc, docker.errors.NotFound):
        return False
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code or 0
        return status >= 500 or status in (403, 409)
    return isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout))


def _remove(remove: Callable[[], object]) -> bool:
    """Run an idempotent removal, retried on transient errors; False when already gone."""
    retrying = Retrying(
        stop=stop_after_attempt(REMOVE_ATTEMPTS),
        wait=exponential_backoff(REMOVE_WAIT_MAX / 8, REMOVE_WAIT_MAX),
        retry=retry_if_exception(_transient_docker_error),
        reraise=True,
    )
    try:
        retrying(remove)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # still "removal in progress": another process (a sweep) has it
            return False
        raise
    return True


def remove_container(container: Any) -> bool:
    """Force-remove a container and its anonymous volumes; False when it was gone."""
    return _remove(lambda: container.remove(force=True, v=True))


def remove_network(network: Any) -> bool:
    """Remove a network; False when it was gone."""
    return _remove(network.remove)
