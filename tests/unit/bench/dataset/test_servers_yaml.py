"""A checkout's servers/servers.yaml read as data (bench/dataset/servers_yaml.py): each
entry tbx runs with its command expanded, each it cannot run with the reason a user sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.dataset.servers_yaml import IMAGE_PYTHON, read_servers_yaml
from sandbox.checkout_server import failure_line


def _checkout(tmp_path: Path, text: str, packages: tuple[str, ...] = ("tools",)) -> Path:
    (tmp_path / "servers").mkdir()
    for package in packages:
        (tmp_path / "servers" / package).mkdir()
    (tmp_path / "servers" / "servers.yaml").write_text(text)
    return tmp_path


def test_entries_tbx_runs_and_those_it_cannot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBX_TEST_FLAG", "on")
    root = _checkout(
        tmp_path,
        """
servers:
  good:
    type: mcp-process
    command: ["{python}", "-m", "tools.mcp_good", "--flag={env[TBX_TEST_FLAG]}", "{{x}}"]
    env: {TYPESENSE_API_KEY: Fake}
  remote: {type: mcp-remote, endpoint: "http://x"}
  odd: {type: mcp-sse, command: [a]}
  nofolder: {type: mcp-process, command: ["{python}", "-m", "other.mcp_x"]}
  noenv: {type: mcp-process, command: ["{env[TBX_TEST_UNSET_VAR]}"]}
  nomodule: {type: mcp-process, command: [my-server]}
  nocommand: {type: mcp-process}
""",
    )
    parsed, problems = read_servers_yaml(root)
    assert problems == []
    good = parsed.servers["good"]
    assert good.command == [IMAGE_PYTHON, "-m", "tools.mcp_good", "--flag=on", "{x}"]
    assert good.env == {"TYPESENSE_API_KEY": "Fake"} and good.package == "tools"
    assert list(parsed.servers) == ["good"]
    assert parsed.refused["remote"].startswith("type mcp-remote is not supported by tbx")
    assert parsed.refused["odd"] == "unknown type 'mcp-sse' (servers.yaml types: mcp-process, mcp-remote)"
    assert parsed.refused["nofolder"] == "its package folder servers/other does not exist"
    assert "cannot expand 'TBX_TEST_UNSET_VAR'" in parsed.refused["noenv"]
    assert parsed.refused["nomodule"].startswith("its command names no module (-m <package>.<module>)")
    assert parsed.refused["nocommand"] == "command must be a non-empty list of strings"


def test_no_servers_yaml_declares_nothing(tmp_path: Path) -> None:
    parsed, problems = read_servers_yaml(tmp_path)
    assert parsed.servers == {} and parsed.refused == {} and problems == []


def test_the_line_that_says_why_a_server_did_not_start() -> None:
    traceback = (
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "ModuleNotFoundError: No module named 'mcp.server.fastmcp'\n"
        "tbx bridge: checkout server s exited before answering the MCP handshake (exit code 1)\n"
    )
    assert failure_line(traceback) == "ModuleNotFoundError: No module named 'mcp.server.fastmcp'"
    assert failure_line("") == "(it printed nothing)"
