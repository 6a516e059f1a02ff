"""A checkout's tool server (servers/servers.yaml, `type: mcp-process`), one container per
server of an attempt: the image tbx built for its package (sandbox.images:
build_checkout_image) runs tbx's bridge (servers/bridge), which starts the server as
servers.yaml says and serves it over MCP streamable HTTP like a native domain's server
(same port, upstream secret, `/healthz`). Here: its container config, its data mount,
the reserved tools tbx calls itself (`__reserved__init` at boot with the world state,
`__reserved__geteffects` after the attempt, `__reserved__teardown` at close, on the
bridge's `/reserved/<name>`, never reachable by a client) and the start check
`tbx tasks validate --servers` runs.

The world state is part of the request (and of a warm pool's shape), so a pool's
spares are initialised ahead: nothing task-specific is left for the hand-over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import docker.errors
import httpx
from docker.types import Mount
from pydantic import BaseModel, ConfigDict, Field

from sandbox.errors import CheckoutServerError
from sandbox.mcp_server import (
    SERVER_PORT,
    SERVER_UID,
    UPSTREAM_SECRET_ENV,
    UPSTREAM_SECRET_HEADER,
    server_role,
)
from sandbox.services import HttpProbe, ServiceSpec, tmpfs_mount

DATA_ROOT = "/data"  # THINKINGBOX_DATA inside the container
DATA_ENV = "THINKINGBOX_DATA"
# The checkout folders a server may read (mounted read-only under DATA_ROOT); never
# dataset/ or releases/, where the golden calls and the tests are.
DATA_FOLDERS = ("support",)
INIT_TIMEOUT = 120.0  # the airline init loads ~5 MB of JSON: ~0.6 s idle
EFFECTS_TIMEOUT = 120.0
TEARDOWN_TIMEOUT = 5.0
CHECK_TIMEOUT = 180.0  # a start check: the interpreter, the imports, the handshake
TOOL_ERROR_HEADER = "X-Tbx-Tool-Error"  # servers/bridge/app.py sets it


class CheckoutServer(BaseModel):
    """One checkout server of an attempt's set: what to run and what to initialise it with."""

    model_config = ConfigDict(frozen=True)

    name: str  # the servers.yaml name (the world_state key)
    image: str  # tag of its package's image
    command: list[str]  # argv, `{python}` already the image's interpreter
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    checkout: str | None = None  # host path of the checkout: DATA_FOLDERS mounted read-only
    # The config sent to __reserved__init (scenario world_state + test init, merged).
    world_state: dict[str, Any] = Field(default_factory=dict)

    def key(self) -> str:
        """Everything that changes what runs (a warm pool's shape)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def role(server: CheckoutServer) -> str:
    return server_role(server.name)


def bridge_env(server: CheckoutServer, secret: str) -> dict[str, str]:
    """The container's environment: the server's own (servers.yaml `env`), THINKINGBOX_DATA,
    and the bridge's settings (TBX_*, which the bridge keeps from the server)."""
    env = {DATA_ENV: DATA_ROOT, "FASTMCP_LOG_LEVEL": "WARNING", **server.env}
    env |= {
        "TBX_BRIDGE_SERVER": server.name,
        "TBX_BRIDGE_COMMAND": json.dumps(server.command),
        **({"TBX_BRIDGE_CWD": server.cwd} if server.cwd else {}),
        UPSTREAM_SECRET_ENV: secret,
    }
    return env


def checkout_server_spec(server: CheckoutServer, secret: str) -> ServiceSpec:
    return ServiceSpec(
        role=role(server),
        image=server.image,
        port=SERVER_PORT,
        ready=HttpProbe("/healthz", {UPSTREAM_SECRET_HEADER: secret}),
        env=bridge_env(server, secret),
        command=["--port", str(SERVER_PORT)],
        tmpfs={"/tmp": tmpfs_mount("64m", SERVER_UID)},
        user=str(SERVER_UID),
    )


def data_mounts(server: CheckoutServer) -> list[Mount]:
    """The checkout's data folders, read-only (the airline server opens $THINKINGBOX_DATA/support/...)."""
    if server.checkout is None:
        return []
    from pathlib import Path

    return [
        Mount(f"{DATA_ROOT}/{folder}", str(Path(server.checkout, folder)), type="bind", read_only=True)
        for folder in DATA_FOLDERS
        if Path(server.checkout, folder).is_dir()
    ]


def reserved_url(mcp_url: str, tool: str) -> str:
    return mcp_url.removesuffix("/mcp") + f"/reserved/{tool}"


def _client(secret: str, interface: str | None, timeout: float) -> httpx.Client:
    from sandbox.proxy.relay import bind_to_device

    options = [bind_to_device(interface)] if interface else None
    return httpx.Client(
        headers={UPSTREAM_SECRET_HEADER: secret},
        timeout=httpx.Timeout(timeout, connect=10.0),
        transport=httpx.HTTPTransport(socket_options=options),
    )


def call_reserved(
    name: str,
    mcp_url: str,
    tool: str,
    arguments: Mapping[str, Any],
    secret: str,
    interface: str | None,
    timeout: float,
) -> tuple[str, bool] | None:
    """(first text content, isError) of a reserved tool's answer; None when the server has no such tool."""
    with _client(secret, interface, timeout) as client:
        try:
            reply = client.post(reserved_url(mcp_url, tool), content=json.dumps(arguments))
        except httpx.HTTPError as exc:
            raise CheckoutServerError(
                f"checkout server {name}: __reserved__{tool} got no answer: {exc!r}"
            ) from exc
    if reply.status_code == 404:
        return None
    if reply.status_code != 200:
        raise CheckoutServerError(f"checkout server {name}: __reserved__{tool} failed: {reply.text[:2000]}")
    return reply.text, reply.headers.get(TOOL_ERROR_HEADER) == "1"


def init_server(server: CheckoutServer, mcp_url: str, secret: str, interface: str | None) -> dict[str, Any]:
    """Call __reserved__init with the world state; the init result (the answer minus `status`).
    An answer other than `{}` or an object with status "ok" is the world state's fault:
    CheckoutServerError naming the server and quoting the answer (no retry cures it)."""
    answer = call_reserved(
        server.name, mcp_url, "init", {"config": server.world_state}, secret, interface, INIT_TIMEOUT
    )
    if answer is None:
        return {}
    text, is_error = answer
    parsed = _json_object(text)
    if not is_error and parsed is not None and (parsed == {} or parsed.get("status") == "ok"):
        return {k: v for k, v in parsed.items() if k != "status"}
    raise CheckoutServerError(
        f"checkout server {server.name}: __reserved__init refused its world state: {text[:2000]}"
    )


def fetch_effects(name: str, mcp_url: str, secret: str, interface: str | None) -> dict[str, Any]:
    """The server's __reserved__geteffects object, key order kept; {} for anything else."""
    answer = call_reserved(name, mcp_url, "geteffects", {}, secret, interface, EFFECTS_TIMEOUT)
    if answer is None or answer[1]:
        return {}
    return _json_object(answer[0]) or {}


def teardown(name: str, mcp_url: str, secret: str, interface: str | None) -> None:
    """__reserved__teardown where the server has it; errors ignored (as the reference)."""
    with contextlib.suppress(CheckoutServerError):
        call_reserved(name, mcp_url, "teardown", {}, secret, interface, TEARDOWN_TIMEOUT)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_server(server: CheckoutServer) -> None:
    """`check_tools` once per image and command (a marker in tbx's cache): a server that
    fails to import is found before any attempt, named, never as a retried system error."""
    from sandbox.cache import cache_dir

    what = server.model_copy(update={"world_state": {}}).key()
    marker = cache_dir("checkout-checked", what)
    if marker.exists():
        return
    check_tools(server)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def check_tools(server: CheckoutServer, timeout: float = CHECK_TIMEOUT) -> list[str]:
    """Start the server once in a container of its own (no network, the attempt's hardening),
    run the MCP handshake and list its tools: the tool names, or CheckoutServerError naming the
    server and the last line of what it printed (e.g. the failing import)."""
    import os

    from sandbox.docker_api import docker_client, remove_container
    from sandbox.labels import labels_for, new_id

    labels = labels_for("check", new_id("check"), f"check-{server.name}", os.getpid())  # swept like any
    client = docker_client()
    env = bridge_env(server, "check")
    try:
        container = client.containers.run(
            server.image,
            ["--check"],
            environment=env,
            detach=True,
            network_mode="none",
            labels=labels,
            read_only=True,
            tmpfs={"/tmp": tmpfs_mount("64m", SERVER_UID)},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            mem_limit="512m",
            pids_limit=256,
            user=str(SERVER_UID),
            mounts=data_mounts(server),
        )
    except docker.errors.ImageNotFound:
        raise CheckoutServerError(f"checkout server {server.name}: image {server.image} is missing") from None
    try:
        try:
            status = container.wait(timeout=timeout)
        except Exception:
            raise CheckoutServerError(
                f"checkout server {server.name}: no answer to the MCP handshake within {timeout:.0f}s"
            ) from None
        out = container.logs(stdout=True, stderr=False).decode(errors="replace").strip()
        err = container.logs(stdout=False, stderr=True).decode(errors="replace").strip()
    finally:
        remove_container(container)
    if status.get("StatusCode") == 0:
        for line in reversed(out.splitlines()):
            report = _json_object(line)
            if report is not None and isinstance(report.get("tools"), list):
                return [str(t) for t in report["tools"]]
    raise CheckoutServerError(
        f"checkout server {server.name} does not start ({' '.join(server.command)}): {failure_line(err)}"
    )


def failure_line(stderr: str) -> str:
    """The line that says why a Python process failed: the traceback's last (the exception),
    else the last line printed."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("tbx bridge:")]
    for line in reversed(lines):
        if "Error" in line.split(":", 1)[0] or "Exception" in line.split(":", 1)[0]:
            return line
    return lines[-1] if lines else "(it printed nothing)"


def server_effects(
    checkout_servers: list[str], servers: Mapping[str, str], secret: str, interface: str | None
) -> dict[str, Any]:
    """Every checkout server's effects (server name -> its geteffects object), in
    server_config order: what the tests read as `x.effects` and the attempt records."""
    return {name: fetch_effects(name, servers[name], secret, interface) for name in checkout_servers}
