"""Idempotent Docker removals are retried on transient errors (tenacity), gone
is not an error, and anything else fails at once."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest
import requests

from sandbox import docker_api
from sandbox.docker_api import remove_container, remove_network


class Response:
    def __init__(self, status: int):
        self.status_code = status
        self.reason = "scripted"
        self.url = "http://docker/x"

    def json(self) -> dict[str, Any]:
        return {"message": "scripted"}


def api_error(status: int) -> docker.errors.APIError:
    cls = docker.errors.NotFound if status == 404 else docker.errors.APIError
    return cls(f"scripted {status}", response=Response(status))  # type: ignore[arg-type]


class Scripted:
    """A container/network whose remove() raises the scripted errors, then succeeds."""

    def __init__(self, *errors: BaseException):
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []

    def remove(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_api, "REMOVE_WAIT_MAX", 0.0)


def test_transient_errors_are_retried_until_removed() -> None:
    c = Scripted(api_error(409), api_error(500), requests.exceptions.ConnectionError("reset"))
    assert remove_container(c) is True
    assert c.calls == [{"force": True, "v": True}] * 4


def test_gone_is_not_an_error_and_not_retried() -> None:
    n = Scripted(api_error(404))
    assert remove_network(n) is False and len(n.calls) == 1
    c = Scripted(api_error(409), api_error(404))  # removed by someone else meanwhile
    assert remove_container(c) is False and len(c.calls) == 2


def test_a_lasting_or_a_permanent_error_is_raised() -> None:
    stuck = Scripted(*[api_error(403)] * docker_api.REMOVE_ATTEMPTS)
    with pytest.raises(docker.errors.APIError, match="403 Client Error"):
        remove_network(stuck)
    assert len(stuck.calls) == docker_api.REMOVE_ATTEMPTS
    bad = Scripted(api_error(400))
    with pytest.raises(docker.errors.APIError, match="400 Client Error"):
        remove_container(bad)
    assert len(bad.calls) == 1
