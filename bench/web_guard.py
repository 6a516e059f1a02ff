"""The request guard of tbx's local web servers (`tbx env serve`, `tbx view
--serve`, the Session API): what a web page the operator happens to visit
must not be able to do to them.

A browser lets any page send requests to 127.0.0.1, so binding loopback
alone does not stop another site from driving the server: a form or
`fetch(..., {mode: "no-cors"})` POST with `text/plain`, a WebSocket (no
same-origin rule applies to it), or a DNS-rebinding name that resolves to
127.0.0.1 and so makes the page same-origin. The guard refuses, in order:

    Host     not a loopback name (localhost, 127.0.0.0/8, ::1) or an --allow-host  421
    Origin   present and neither the request's own origin nor an --allow-origin    403
    token    configured and no `Authorization: Bearer <token>` matching it         401
    POST     (PUT, PATCH) whose Content-Type is not application/json                415

Clients that are not browsers send no Origin and set their own Host and
Content-Type, so they pass unchanged; a page cannot forge Host or Origin.

    policy = GuardPolicy(allowed_hosts=("env.internal",), token=os.environ["TBX_ENV_TOKEN"])
    app = WebGuard(app, policy)                       # ASGI: HTTP and WebSocket
    refusal = check_request(method, headers, policy)  # the same decision, for any server
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = [
    "GuardPolicy",
    "Refusal",
    "WebGuard",
    "add_guard_arguments",
    "check_request",
    "policy_from_args",
    "token_from_env",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
JSON_TYPE = "application/json"


class GuardPolicy(BaseModel):
    """What the guard admits beyond loopback Host names and same-origin pages."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_hosts: tuple[str, ...] = ()  # extra Host names (no port), e.g. a reverse proxy's
    allowed_origins: tuple[str, ...] = ()  # extra Origins, e.g. "https://notebook.example:8888"
    token: str | None = None  # when set, every request needs `Authorization: Bearer <token>`
    require_json: bool = True  # POST/PUT/PATCH bodies must be application/json

    @field_validator("allowed_hosts")
    @classmethod
    def _plain_hosts(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for host in hosts:
            name = host.strip().lower()
            if not name or any(c in name for c in "/@ ") or (":" in name and not _is_ip(name.strip("[]"))):
                raise ValueError(f"--allow-host {host!r}: give a host name or address without scheme or port")
            out.append(name.strip("[]"))
        return tuple(out)

    @field_validator("allowed_origins")
    @classmethod
    def _plain_origins(cls, origins: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for origin in origins:
            normal = _origin(origin)
            if normal is None:
                raise ValueError(
                    f"--allow-origin {origin!r}: give scheme://host[:port], e.g. https://app.example"
                )
            out.append(normal)
        return tuple(out)

    @field_validator("token")
    @classmethod
    def _nonempty_token(cls, token: str | None) -> str | None:
        if token is not None and not token.strip():
            raise ValueError("the token is empty")
        return token


class Refusal(BaseModel):
    """Why a request is refused: the HTTP status and a one-line reason for the client."""

    status: int
    reason: str


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _host_name(host_header: str) -> str | None:
    """The name of a Host header without its port ("[::1]:8000" -> "::1"); None if malformed."""
    value = host_header.strip().lower()
    if not value or any(c in value for c in "/@ \\"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        return value[1:end]
    if value.count(":") > 1:  # a bare IPv6 address is not a valid Host header
        return None
    return value.split(":", 1)[0]


def _is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _origin(value: str) -> str | None:
    """`scheme://host:port` with the default port filled in, lower case; None if not an origin."""
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port or _DEFAULT_PORTS[parts.scheme]}"


def _own_origins(host_header: str) -> set[str]:
    """The origins a page served by this server under `host_header` has (http or https)."""
    return {o for scheme in ("http", "https") if (o := _origin(f"{scheme}://{host_header.strip()}"))}


def check_request(
    method: str, headers: Mapping[str, str] | Iterable[tuple[str, str]], policy: GuardPolicy
) -> Refusal | None:
    """None when the request may proceed, else why not. `headers`: names in any case;
    a name given twice (a smuggling attempt for Host or Origin) is refused."""
    seen: dict[str, list[str]] = {}
    for name, value in headers.items() if isinstance(headers, Mapping) else headers:
        seen.setdefault(name.lower(), []).append(value)
    for name in ("host", "origin", "authorization", "content-type"):
        if len(seen.get(name, ())) > 1:
            return Refusal(status=400, reason=f"more than one {name.title()} header")
    host = seen.get("host", [""])[0]
    name = _host_name(host)
    if name is None:
        return Refusal(status=421, reason="a valid Host header is required")
    if not _is_loopback(name) and name not in policy.allowed_hosts:
        return Refusal(
            status=421,
            reason=f"Host {name!r} is not served here (loopback names only; the operator can add --allow-host)",
        )
    if "origin" in seen:
        origin = _origin(seen["origin"][0])
        if origin is None or (origin not in _own_origins(host) and origin not in policy.allowed_origins):
            return Refusal(
                status=403,
                reason="cross-origin requests are refused (the operator can add --allow-origin)",
            )
    if policy.token is not None:
        given = seen.get("authorization", [""])[0]
        scheme, _, credential = given.strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            credential.strip().encode(), policy.token.encode()
        ):
            return Refusal(status=401, reason="a valid 'Authorization: Bearer <token>' header is required")
    if policy.require_json and method.upper() in BODY_METHODS:
        media = seen.get("content-type", [""])[0].split(";", 1)[0].strip().lower()
        if media != JSON_TYPE:
            return Refusal(status=415, reason=f"the request body must be sent as Content-Type: {JSON_TYPE}")
    return None


def _decoded(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]


def _body(refusal: Refusal) -> bytes:
    return json.dumps({"detail": refusal.reason, "code": "REFUSED"}).encode()


class WebGuard:
    """ASGI middleware applying `check_request` to every HTTP request and WebSocket handshake
    (lifespan passes through). A refused HTTP request gets the refusal's status and a JSON
    `{"detail": reason, "code": "REFUSED"}`; a refused WebSocket handshake gets a 403."""

    def __init__(self, app: ASGIApp, policy: GuardPolicy):
        self.app, self.policy = app, policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET") if kind == "http" else "GET"
        refusal = check_request(method, _decoded(scope.get("headers", ())), self.policy)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        body = _body(refusal)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if refusal.status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if kind == "http":
            await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        # Closing before accept is a 403 without a body. The ASGI denial-response extension
        # could carry the status and reason, but uvicorn's websockets-sansio and wsproto
        # protocols then log "ASGI callable returned without completing handshake" as an
        # error for every refused handshake.
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008})


def token_from_env(var: str | None) -> str | None:
    """The bearer token from environment variable `var` (None: no token); a clear error
    when the variable is unset or empty (a token on the command line would show in `ps`)."""
    if var is None:
        return None
    value = os.environ.get(var, "")
    if not value.strip():
        raise ValueError(f"--token-env {var}: the environment variable is unset or empty")
    return value.strip()


def policy_from_args(
    allow_host: Iterable[str] | None,
    allow_origin: Iterable[str] | None = None,
    token_env: str | None = None,
) -> GuardPolicy:
    """The policy of a server's --allow-host/--allow-origin/--token-env flags (ValueError: which one is bad)."""
    from pydantic import ValidationError

    token = token_from_env(token_env)
    try:
        return GuardPolicy(
            allowed_hosts=tuple(allow_host or ()), allowed_origins=tuple(allow_origin or ()), token=token
        )
    except ValidationError as exc:
        raise ValueError(
            "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        ) from None


def add_guard_arguments(parser: argparse.ArgumentParser, *, token: bool = True) -> None:
    """The guard's flags, the same on every server command: --allow-host, --allow-origin
    and (`token`) --token-env. Read them back with `policy_from_args(args.allow_host, ...)`."""
    parser.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="also answer requests for this Host name (default: loopback names only, against DNS rebinding)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="also admit browser requests from this origin, e.g. https://app.example (default: none)",
    )
    if token:
        parser.add_argument(
            "--token-env",
            metavar="VAR",
            help="require 'Authorization: Bearer <token>' with the token read from this environment variable",
        )
