"""Hardened by default: what `docker inspect` and the running processes say about
an attempt's containers, and what the tool servers' database role may do."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import docker
import psycopg
import psycopg.errors
import pytest

from bench.dataset import load_benchmark
from bench.prepare import TaskPreparation, sandbox_request
from bench.replay.mcp_calls import replay_calls
from sandbox import AttemptHandle, Limits, Sandbox, SandboxError, leftovers, require_image
from sandbox.runtime_volumes import PATHS_LABEL, volume_name
from servers.engine.store import TOOL_ROLE

pytestmark = pytest.mark.docker

LIMITS = Limits()
MEMORY = 512 * 1024 * 1024
assert LIMITS.memory == "512m"


def _proc_status(dexec: Any, cid: str) -> dict[str, str]:
    code, out = dexec(cid, ["cat", "/proc/1/status"])
    assert code == 0, out
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


def assert_hardened(dclient: docker.DockerClient, dexec: Any, handle: AttemptHandle, role: str) -> None:
    cid = handle.containers[role]
    attrs = dclient.containers.get(cid).attrs
    host = attrs["HostConfig"]
    assert [c.upper().removeprefix("CAP_") for c in host["CapDrop"] or []] == ["ALL"], role
    assert not host["CapAdd"], role
    assert host["Privileged"] is False, role
    assert any(o.startswith("no-new-privileges") and not o.endswith("false") for o in host["SecurityOpt"]), (
        role
    )
    assert host["Memory"] == MEMORY and host["MemorySwap"] == MEMORY, role
    assert host["PidsLimit"] == LIMITS.pids, role
    assert LIMITS.cpus and host["NanoCpus"] == int(LIMITS.cpus * 1e9), role  # a CPU quota
    assert host["ReadonlyRootfs"] is True, role
    assert host["IpcMode"] == "private", role
    assert not host["Binds"], role
    assert all(m["Type"] != "bind" for m in attrs["Mounts"]), role
    # The only volumes are the image's own code trees (sandbox.runtime_volumes), read-only.
    image_id = attrs["Image"]
    volumes = [m for m in attrs["Mounts"] if m["Type"] == "volume"]
    paths = (dclient.images.get(image_id).labels or {}).get(PATHS_LABEL, "").split()
    assert paths and sorted(m["Destination"] for m in volumes) == sorted(paths), role
    for m in volumes:
        assert m["RW"] is False and m["Name"] == volume_name(image_id, m["Destination"]), (role, m)
        code, _ = dexec(cid, ["sh", "-c", f"echo x > {m['Destination']}/probe"])
        assert code != 0, f"{role}: {m['Destination']} is writable"
    assert "docker.sock" not in json.dumps(attrs), role
    for path, opts in (host["Tmpfs"] or {}).items():
        assert {"nosuid", "nodev", "noexec"} <= set(opts.split(",")), (role, path)

    # What the running service process actually has.
    status = _proc_status(dexec, cid)
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, (role, status["CapEff"])
    assert status["NoNewPrivs"].strip() == "1", role
    uid = int(status["Uid"].split()[0])
    assert uid != 0, f"{role} runs as root"
    # Read-only root filesystem, writable tmpfs.
    code, _ = dexec(cid, ["sh", "-c", "echo x > /probe"])
    assert code != 0, f"{role}: root filesystem is writable"
    code, out = dexec(cid, ["sh", "-c", "echo x > /tmp/probe && rm /tmp/probe"])
    assert code == 0, (role, out)


def test_postgres_and_server_containers_are_hardened(
    sandbox_pair: Any, dclient: docker.DockerClient, dexec: Any
) -> None:
    handle = sandbox_pair.a
    assert set(handle.containers) == {"postgres", "server-retail"}
    for role in handle.containers:
        assert_hardened(dclient, dexec, handle, role)
    # The tool server gets the tool role's DSN and nothing else that opens the database.
    env = dclient.containers.get(handle.containers["server-retail"]).attrs["Config"]["Env"]
    dsn = next(e for e in env if e.startswith("TBX_PG_DSN="))
    assert f"user={TOOL_ROLE}" in dsn and handle.pg.tool_password in dsn
    assert handle.pg.admin_password not in json.dumps(env)
    # The PostgreSQL image's bootstrap password no longer opens anything.
    stale = handle.pg.model_copy(update={"admin_password": "tbx-bootstrap"})
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(stale.admin_dsn("retail")).close()


def _denied(conn: psycopg.Connection[Any], statement: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
        conn.execute(statement)


def test_tool_role_cannot_escape_its_tables(sandbox_pair: Any) -> None:
    handle = sandbox_pair.b
    with psycopg.connect(handle.pg.tool_dsn("retail"), autocommit=True) as conn:
        # Positive control: the role reads and writes its domain's rows.
        orders = conn.execute("SELECT count(*) FROM external_retail_toolset_oms_models_orders").fetchone()
        assert orders is not None and orders[0] > 0
        with conn.transaction(force_rollback=True):
            conn.execute("UPDATE zendesk_tickets SET subject = subject")

        flags = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert flags == (False, False, False, False)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("10s",)
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("1min",)

        _denied(conn, "CREATE TABLE probe (a int)")
        _denied(conn, "CREATE TABLE public.probe (a int)")
        _denied(conn, "CREATE SCHEMA probe")
        _denied(conn, "DROP TABLE zendesk_tickets")
        _denied(conn, "SELECT pg_read_file('PG_VERSION')")
        _denied(conn, "SELECT pg_ls_dir('.')")
        _denied(conn, "COPY (SELECT 1) TO PROGRAM 'true'")
        _denied(conn, "SET ROLE postgres")
        _denied(conn, "ALTER ROLE postgres PASSWORD 'x'")
        _denied(conn, "CREATE ROLE probe")
        # PostgreSQL lets any role change its own statement_timeout (SET or ALTER ROLE
        # self SET): the role default is only a default; the limits the role cannot lift
        # are tested below (test_tool_role_cannot_lift_the_statement_and_idle_limits).


def test_statement_timeout_cancels_a_runaway_tool_query(sandbox_pair: Any) -> None:
    handle = sandbox_pair.b
    with psycopg.connect(handle.pg.tool_dsn("retail"), autocommit=True) as conn:
        conn.execute("SET statement_timeout = '200ms'")  # same mechanism as the role's 10 s, faster
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            conn.execute("SELECT pg_sleep(5)")


@pytest.fixture(scope="module")
def retail_task_with_policies(dataset: Path) -> tuple[Any, Any]:
    bench = load_benchmark(dataset)
    for task in bench.tasks:
        if task.domain == "retail" and bench.effective_init(task).sources:
            return bench, task
    pytest.fail("no retail task with policy sources in the dataset")


def test_typesense_sandbox_is_hardened_and_serves_policy_search(
    dclient: docker.DockerClient,
    dexec: Any,
    base_images: dict[str, str],
    retail_task_with_policies: tuple[Any, Any],
    outside: tuple[str, int],
    run_id: str,
) -> None:
    """Needs the Typesense image (`tbx images build typesense`); fails, not skips, without it."""
    try:
        require_image("typesense")
    except SandboxError as exc:
        pytest.fail(f"typesense image missing: {exc}")
    bench, task = retail_task_with_policies
    request = sandbox_request(bench, task, typesense=True, run_id=run_id)
    assert isinstance(request.prepare, TaskPreparation) and request.prepare.sources
    with Sandbox(request) as sb:
        handle = sb.handle
        assert handle is not None and handle.typesense_url and handle.collection
        assert set(handle.containers) == {"postgres", "typesense", "server-retail"}
        for role in handle.containers:
            assert_hardened(dclient, dexec, handle, role)
        ts = dclient.containers.get(handle.containers["typesense"]).attrs
        assert not ts["HostConfig"]["PortBindings"]
        # The server reaches its Typesense through the private network.
        [rec] = asyncio.run(
            replay_calls(
                handle.servers["retail"], [("search_policy", {"query": "return"})], handle.server_headers
            )
        )
        assert not rec.is_error, rec.result
        assert rec.result.strip() not in ("", "[]", "{}")
        # hybrid by default: the server embedded the query itself and got real distances
        snippets = json.loads(rec.result)["snippets"]
        assert len(snippets) == 3 and all(0.0 <= s["vector_distance"] < 2.0 for s in snippets), snippets
        # Typesense has no way out either (bash /dev/tcp; no python in that image).
        ip, port = outside
        probe = "exec 3<>/dev/tcp/{}/{}"
        ts_id = handle.containers["typesense"]
        code, _ = dexec(ts_id, ["timeout", "2", "bash", "-c", probe.format(ip, port)])
        assert code != 0, "typesense reached a listener outside its network"
        code, out = dexec(ts_id, ["timeout", "2", "bash", "-c", probe.format(handle.pg.host, 5432)])
        assert code == 0, out  # the same probe inside the network connects
    assert leftovers(run_id) == ([], [])


# Small limits so each one is reached in seconds; the defaults are the same mechanisms.
TIGHT = Limits(pg_statement_seconds=5, pg_idle_seconds=2, pg_temp_file_limit="8MB", pg_data="96m")


@pytest.fixture(scope="module")
def tight_sandbox(base_images: Any, retail_rows: Any) -> Any:
    from bench.prepare import seeded_request
    from sandbox import new_id

    req = seeded_request(
        {"retail": retail_rows},
        typesense=False,
        run_id=new_id("run-it-limits"),
        limits=TIGHT,
        images=base_images,
    )
    with Sandbox(req) as sb:
        assert sb.handle is not None
        yield sb.handle
    assert leftovers(req.run_id) == ([], [])


def test_tool_role_cannot_lift_the_statement_and_idle_limits(tight_sandbox: AttemptHandle) -> None:
    dsn = tight_sandbox.pg.tool_dsn("retail")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER ROLE tbx_tool SET statement_timeout = 0")  # allowed, and it persists
        conn.execute("ALTER ROLE tbx_tool SET idle_in_transaction_session_timeout = 0")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
        conn.execute("SET statement_timeout = 0")
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(60)")
        assert (
            time.monotonic() - t0 < TIGHT.pg_statement_seconds + 3
        )  # a watchdog check every second at limits this tight
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session survives a cancelled statement
    with psycopg.connect(dsn) as conn:  # a transaction left open past the idle limit is ended
        conn.execute("SELECT 1")
        time.sleep(TIGHT.pg_idle_seconds + 3)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")


def test_tool_role_has_no_temporary_objects_and_a_temp_file_limit(tight_sandbox: AttemptHandle) -> None:
    with psycopg.connect(tight_sandbox.pg.tool_dsn("retail"), autocommit=True) as conn:
        _denied(conn, "CREATE FUNCTION pg_temp.probe() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        _denied(conn, "CREATE TEMP TABLE probe (a int)")
        _denied(conn, "SET temp_file_limit = -1")
        _denied(conn, "ALTER ROLE tbx_tool SET temp_file_limit = -1")
        conn.execute("SET work_mem = '64kB'")
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded, match="temp_file_limit"):
            conn.execute("SELECT count(*) FROM generate_series(1, 2000000)")  # the function's result spills


def test_filling_the_data_tmpfs_is_a_clean_error(tight_sandbox: AttemptHandle) -> None:
    """Row rights are enough to write until the data tmpfs is full: the statement fails
    with "No space left on device", PostgreSQL stays up, and the judge still reads the state."""
    with psycopg.connect(tight_sandbox.pg.tool_dsn("retail"), autocommit=True) as conn:
        filler = "(SELECT string_agg(md5(random()::text || g), '') FROM generate_series(1, 2000) g)"
        with pytest.raises(psycopg.errors.DiskFull, match="No space left on device"):
            for _ in range(2000):
                conn.execute(f"UPDATE zendesk_tickets SET subject = {filler}")
    with psycopg.connect(tight_sandbox.pg.admin_dsn("retail"), autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM zendesk_tickets").fetchone()
        assert row is not None and row[0] > 0
