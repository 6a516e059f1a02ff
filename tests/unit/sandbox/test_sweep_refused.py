"""A network the daemon refuses to remove (a stale endpoint of a killed container:
"has active endpoints" with none listed) is reported by the sweep, not raised: the
sweep runs at the start of `tbx up`, `tbx run` and `tbx conformance`, which must go on."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest

import sandbox.docker_api as docker_client_mod
import sandbox.sweeper as sweeper
from sandbox import labels


class StaleNetwork:
    name = "tbx-stale"

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {
            "Labels": {labels.RUN: "run-gone", "tbx.pid": "999999999"},
            "Containers": {},
        }

    def reload(self) -> None:
        pass

    def remove(self) -> None:
        raise docker.errors.APIError(
            "403 Forbidden",
            explanation="error while removing network: network tbx-stale has active endpoints",
        )


class FakeClient:
    def __init__(self) -> None:
        self.containers = self
        self.networks = self
        self.stale = StaleNetwork()

    def list(self, **kwargs: Any) -> list[Any]:
        return [self.stale] if "ignore_removed" not in kwargs else []


def test_a_refused_network_is_reported_and_the_sweep_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeper, "docker_client", FakeClient)
    monkeypatch.setattr(docker_client_mod, "REMOVE_WAIT_MAX", 0.01)
    result = sweeper.sweep()
    assert result.networks == [] and len(result.failed) == 1
    assert "tbx-stale" in result.failed[0] and "active endpoints" in str(result)
