"""The checkout-server bridge (servers/bridge) on the host, in front of a fake stdio
server (fake_stdio_server.py, tbx's own test code): what a client sees on /mcp (no
reserved tool, listed or called), the reserved calls tbx's host side makes
(sandbox.checkout_server: init answers, effects in key order), what the child never
sees (TBX_ variables), and each way a server goes wrong: a line over the cap or no
answer (bounded by the bridge's call timeout, the bridge stays up), a death mid-attempt
(the bridge exits with the child's code, naming it), a failed start (the failing
import in its last words), and the start check's tool list."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types as types
import pytest

from sandbox import CheckoutServer, CheckoutServerError, server_effects, upstream_client
from sandbox.checkout_server import fetch_effects, init_server

FAKE = Path(__file__).with_name("fake_stdio_server.py")
SECRET = "s3cret"
HEADERS = {"X-Tbx-Upstream-Secret": SECRET}


def _env(mode: str = "ok", **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "FAKE_MODE": mode,
        "TBX_BRIDGE_SERVER": "fake_server",
        "TBX_BRIDGE_COMMAND": json.dumps([sys.executable, str(FAKE)]),
        "TBX_BRIDGE_LINE_CAP": "65536",
        "TBX_BRIDGE_CALL_TIMEOUT": "1.5",
        "TBX_UPSTREAM_SECRET": SECRET,
        **extra,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    port = _free_port()
    log = tmp_path / "bridge.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "servers.bridge", "--host", "127.0.0.1", "--port", str(port)],
        env=_env(),
        stderr=log.open("w"),
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", headers=HEADERS).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"the bridge did not answer: {log.read_text()}")
    try:
        yield url, proc, log
    finally:
        proc.terminate()  # the bridge stops its child on the way out
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _server(world_state: dict[str, object]) -> CheckoutServer:
    return CheckoutServer(name="fake_server", image="unused", command=["unused"], world_state=world_state)


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_clients_see_no_reserved_tool_and_host_side_calls_them(
    bridge: tuple[str, subprocess.Popen[str], Path],
) -> None:
    url, proc, log = bridge
    assert httpx.get(url + "/healthz").status_code == 401  # no secret, no answer
    assert httpx.post(url + "/reserved/geteffects", content="{}").status_code == 401
    async with upstream_client(url + "/mcp", HEADERS) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["echo", "configure_data", "hang", "flood", "die", "env"]
        refused = await client.call_tool("__reserved__init", {"config": {"a": 9}})
        assert refused.is_error and "Unknown tool" in _text(refused)
        assert json.loads(_text(await client.call_tool("echo", {"x": "hi"}))) == {"status": "ok", "x": "hi"}
        assert json.loads(_text(await client.call_tool("env", {}))) == []  # the secret stays with the bridge

    assert init_server(_server({"u1": 1, "u0": 0}), url + "/mcp", SECRET, None) == {"users": ["u1", "u0"]}
    with pytest.raises(
        CheckoutServerError, match=r"fake_server: __reserved__init refused its world state: .*'nope'"
    ):
        init_server(_server({"bad": "nope"}), url + "/mcp", SECRET, None)
    effects = fetch_effects("fake_server", url + "/mcp", SECRET, None)
    assert list(effects) == ["z", "a", "m", "echoed", "u1", "u0"] and list(effects["m"]) == ["y", "b"]
    assert server_effects(["fake_server"], {"fake_server": url + "/mcp"}, SECRET, None) == {
        "fake_server": effects
    }

    # a line over the cap and a call never answered: bounded by the call timeout, the bridge stays up
    async with upstream_client(url + "/mcp", HEADERS) as client:
        for tool in ("flood", "hang"):
            t = time.monotonic()
            with pytest.raises(Exception, match=r"(?i)timed out|timeout"):
                await client.call_tool(tool, {})
            assert time.monotonic() - t < 10
        assert json.loads(_text(await client.call_tool("echo", {"x": "after"})))["x"] == "after"

    # a death mid-attempt ends the bridge with the server's exit code, naming it
    with pytest.raises(Exception):  # noqa: B017 - the connection ends with the process
        async with upstream_client(url + "/mcp", HEADERS) as client:
            await client.call_tool("die", {})
    assert proc.wait(timeout=10) == 3
    assert "checkout server fake_server exited while serving (exit code 3)" in log.read_text()


def test_a_server_that_fails_to_start_and_the_start_check() -> None:
    cmd = [sys.executable, "-m", "servers.bridge", "--check"]
    failed = subprocess.run(cmd, env=_env("crash_on_start"), capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert "ModuleNotFoundError: No module named 'mcp.server.fastmcp'" in failed.stderr
    assert "fake_server exited before answering the MCP handshake (exit code 1)" in failed.stderr
    ok = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["tools"][:3] == [
        "__reserved__init",
        "__reserved__geteffects",
        "echo",
    ]
