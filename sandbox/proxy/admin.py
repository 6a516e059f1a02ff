"""The host-side admin API of a standalone proxy (`tbx proxy`): a second
listener on 127.0.0.1, separate from the agent-facing MCP port, protected by
an admin token printed at start (`Authorization: Bearer <admin token>`).

    POST   /attempts                 RegisterRequest (sandbox.proxy.models): {"attempt_id",
                                      "upstreams": {domain: {"url", "headers"}} (or {domain: url}),
                                      "policy": {"allowed_tools", "overrides", "arg_overrides"},
                                      "call_timeout", "containers": {role: id}, "network"}
                                     -> 201 Registration {"attempt_id", "token", "url", "path_url", "tools"}
    GET    /attempts                 -> {"attempts": [attempt ids]}
    GET    /attempts/{token}         -> {"gone": null | "why its sandbox is lost"}
    GET    /attempts/{token}/calls   -> {"calls": [ProxyCall]}
    DELETE /attempts/{token}         -> {"calls": [ProxyCall]} (the attempt's token stops working)

Errors answer {"error": "..."} with 400 (bad request), 401 (admin token),
404 (unknown attempt token), 409 (a named container is not running) or 502
(an upstream could not be reached).
`AdminClient` is the matching Python client.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandbox.proxy.models import (
    ProxyCall,
    ProxyError,
    RegisterRequest,
    Registration,
    SandboxGoneError,
    UpstreamUnreachable,
)

if TYPE_CHECKING:
    from sandbox.proxy.registry import AttemptRegistry


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def build_admin_app(registry: AttemptRegistry, admin_token: str) -> Starlette:
    expected = f"Bearer {admin_token}".encode()

    def authorized(request: Request) -> bool:
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)

    async def attempts(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "missing or invalid admin token")
        if request.method == "GET":
            return JSONResponse({"attempts": registry.attempts()})
        try:
            body = RegisterRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return _error(400, f"bad registration: {exc}")
        try:
            reg = await registry.register(body)
        except SandboxGoneError as exc:
            return _error(409, str(exc))
        except ProxyError as exc:
            return _error(502 if isinstance(exc, UpstreamUnreachable) else 400, str(exc))
        return JSONResponse(reg.model_dump(mode="json"), status_code=201)

    async def calls(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "missing or invalid admin token")
        token = request.path_params["token"]
        try:
            recorded = registry.calls(token)
        except ProxyError:
            return _error(404, "unknown attempt token")
        return JSONResponse({"calls": [c.model_dump(mode="json") for c in recorded]})

    async def attempt(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "missing or invalid admin token")
        if request.method == "GET":
            try:
                return JSONResponse({"gone": registry.gone(request.path_params["token"])})
            except ProxyError:
                return _error(404, "unknown attempt token")
        try:
            recorded = await registry.unregister(request.path_params["token"])
        except ProxyError:
            return _error(404, "unknown attempt token")
        return JSONResponse({"calls": [c.model_dump(mode="json") for c in recorded]})

    return Starlette(
        routes=[
            Route("/attempts", attempts, methods=["GET", "POST"]),
            Route("/attempts/{token}/calls", calls, methods=["GET"]),
            Route("/attempts/{token}", attempt, methods=["GET", "DELETE"]),
        ]
    )


class AdminClient:
    """Registers attempts with a standalone proxy over its admin listener."""

    def __init__(self, admin_url: str, admin_token: str, timeout: float = 30.0):
        self._http = httpx.Client(
            base_url=admin_url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=timeout
        )

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _check(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            try:
                message = response.json().get("error", response.text)
            except ValueError:
                message = response.text
            error = SandboxGoneError if response.status_code == 409 else ProxyError
            raise error(f"proxy admin API: {response.status_code}: {message}")
        return response.json()

    def register(self, request: RegisterRequest) -> Registration:
        data = self._check(self._http.post("/attempts", content=request.model_dump_json()))
        return Registration.model_validate(data)

    def gone(self, token: str) -> str | None:
        """Why the attempt's sandbox is lost, else None."""
        gone = self._check(self._http.get(f"/attempts/{token}"))["gone"]
        return None if gone is None else str(gone)

    def calls(self, token: str) -> list[ProxyCall]:
        data = self._check(self._http.get(f"/attempts/{token}/calls"))
        return [ProxyCall.model_validate(c) for c in data["calls"]]

    def unregister(self, token: str) -> list[ProxyCall]:
        data = self._check(self._http.delete(f"/attempts/{token}"))
        return [ProxyCall.model_validate(c) for c in data["calls"]]

    def attempts(self) -> list[str]:
        return list(self._check(self._http.get("/attempts"))["attempts"])
