"""A checkout's ``servers/servers.yaml`` as data: the servers it declares and how each is
started (checkout-servers spec §2). Nothing is run here: tbx runs a declared
``mcp-process`` server that has no tbx domain in a container of the attempt's set
(sandbox.checkout_server), from an image of its package (sandbox.images).

``{python}`` in a command is the image's interpreter; ``{env[NAME]}`` the loading
process's variable NAME (a missing one is a problem); ``{{``/``}}`` literal braces.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import Problem
from .yamlio import parse_yaml, read_text

SERVERS_YAML = "servers/servers.yaml"
PROCESS = "mcp-process"
# `{python}` in a servers.yaml command: the checkout venv's interpreter in its image
# (sandbox.images.CHECKOUT_PYTHON; written here too since the dataset layer runs no image code).
IMAGE_PYTHON = "/opt/checkout/venv/bin/python"


class DeclaredServer(BaseModel):
    """One ``mcp-process`` entry, its command expanded; ``package``: the folder under
    ``servers/`` its module comes from (``-m <package>.<module>``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    package: str


class ServersYaml(BaseModel):
    model_config = ConfigDict(frozen=True)

    servers: dict[str, DeclaredServer] = Field(default_factory=dict)
    # name -> why tbx cannot run it (unknown or unsupported type, bad command, no package folder)
    refused: dict[str, str] = Field(default_factory=dict)


def _package(command: list[str]) -> str | None:
    if "-m" not in command or command.index("-m") + 1 >= len(command):
        return None
    return command[command.index("-m") + 1].split(".")[0] or None


def _entry(root: Path, name: str, entry: Any) -> DeclaredServer | str:
    if not isinstance(entry, dict):
        return f"must be a mapping, got {type(entry).__name__}"
    kind = entry.get("type")
    if kind != PROCESS:
        if kind == "mcp-remote":
            return "type mcp-remote is not supported by tbx (it runs mcp-process servers in the sandbox)"
        return f"unknown type {kind!r} (servers.yaml types: mcp-process, mcp-remote)"
    command = entry.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        return "command must be a non-empty list of strings"
    if entry.get("transport", "stdio") != "stdio":
        return f"transport {entry.get('transport')!r}: only stdio"
    try:
        expanded = [c.format(python=IMAGE_PYTHON, env=os.environ) for c in command]
    except (KeyError, IndexError, ValueError) as exc:
        return f"command {command}: cannot expand {exc} (placeholders: {{python}}, {{env[NAME]}})"
    env = entry.get("env") or {}
    if not isinstance(env, dict):
        return "env must be a mapping"
    cwd = entry.get("cwd")
    package = _package(expanded)
    if package is None:
        return (
            "its command names no module (-m <package>.<module>): tbx builds its image from servers/<package>"
        )
    if not (root / "servers" / package).is_dir():
        return f"its package folder servers/{package} does not exist"
    return DeclaredServer(
        name=name,
        command=expanded,
        env={str(k): str(v) for k, v in env.items()},
        cwd=str(cwd) if cwd else None,
        package=package,
    )


def read_servers_yaml(root: Path) -> tuple[ServersYaml, list[Problem]]:
    """The checkout's declared servers; a missing file declares none."""
    path = root / SERVERS_YAML
    if not path.is_file():
        return ServersYaml(), []
    try:
        config = parse_yaml(read_text(path))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return ServersYaml(), [Problem(path=SERVERS_YAML, message=f"cannot read: {exc}")]
    entries = config.get("servers") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        return ServersYaml(), []
    servers: dict[str, DeclaredServer] = {}
    refused: dict[str, str] = {}
    for name, entry in entries.items():
        got = _entry(root, str(name), entry)
        if isinstance(got, str):
            refused[str(name)] = got
        else:
            servers[str(name)] = got
    return ServersYaml(servers=servers, refused=refused), []
