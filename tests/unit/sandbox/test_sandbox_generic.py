"""The container layer knows no domain (what to seed comes from bench), and
the servers answer only requests carrying the attempt's upstream secret."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

import sandbox.mcp_server
import sandbox.postgres
import sandbox.services
import servers.engine.app
from bench.prepare import TaskPreparation
from sandbox import Preparer, SeedError
from servers.engine.app import RequireSecret

SANDBOX = Path(sandbox.services.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(SANDBOX.glob("*.py")), ids=lambda p: p.name)
def test_sandbox_imports_nothing_above_it(path: Path) -> None:
    assert not _imports(path) & {"servers", "bench", "judge"}


def test_the_secret_is_named_alike_on_both_sides() -> None:
    assert sandbox.mcp_server.UPSTREAM_SECRET_ENV == servers.engine.app.UPSTREAM_SECRET_ENV
    assert sandbox.mcp_server.UPSTREAM_SECRET_HEADER == servers.engine.app.UPSTREAM_SECRET_HEADER
    assert sandbox.postgres.TOOL_ROLE == "tbx_tool"  # created by images/postgres/init-template.sh
    init = (SANDBOX.parent / "images" / "postgres" / "init-template.sh").read_text()
    assert f"CREATE ROLE {sandbox.postgres.TOOL_ROLE} NOLOGIN" in init


async def test_requests_without_the_secret_get_401() -> None:
    async def ok(request: object) -> JSONResponse:
        return JSONResponse({"ok": True})

    app = RequireSecret(Starlette(routes=[Route("/mcp", ok, methods=["GET", "POST"])]), "s3cret")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
        for headers in ({}, {"X-Tbx-Upstream-Secret": "s3cre"}, {"X-Tbx-Upstream-Secret": "s3cretx"}):
            r = await client.post("/mcp", headers=headers)
            assert r.status_code == 401 and r.json() == {"error": "missing or invalid upstream secret"}
        r = await client.post("/mcp", headers={"X-Tbx-Upstream-Secret": "s3cret"})
        assert r.status_code == 200 and r.json() == {"ok": True}


def test_a_server_without_a_secret_does_not_start() -> None:
    with pytest.raises(ValueError, match="TBX_UPSTREAM_SECRET"):
        servers.engine.app.build_app(None, "")  # type: ignore[arg-type]


def test_task_preparation_is_a_preparer_and_checks_on_the_bench_side() -> None:
    orders = "external_retail_toolset_oms_models_orders"
    assert isinstance(TaskPreparation(), Preparer)
    TaskPreparation(rows={"retail": {"zendesk_tickets": [{"loyalty_hint": "x"}]}}).check(["retail"])
    with pytest.raises(SeedError, match="unknown tables: orders"):
        TaskPreparation(rows={"retail": {"orders": []}}).check(["retail"])
    with pytest.raises(SeedError, match="'travel', which the request does not start"):
        TaskPreparation(rows={"travel": {}}).check(["retail"])
    with pytest.raises(SeedError, match=f"table {orders} row 0 has unknown column"):
        TaskPreparation(rows={"retail": {orders: [{"loyalty_hint": "x"}]}}).check(["retail"])
    with pytest.raises(Exception, match="nowhere"):
        TaskPreparation().check(["nowhere"])
