"""The Session API's wire pieces without Docker: request validation (the reference's
lax rules), the envelope, schema normalisation, the effects diff, server_config
parsing, always_json_output, and a session's queue (order, limits, a queued call
that timed out is never run)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bench.dataset import load_benchmark
from bench.session_api.models import ApiError, CallBody, CreateBody, GcBody, fail, ok, timed_out
from bench.session_api.schemas import SchemaError, normalise_schema
from bench.session_api.server_config import check_tools, parse_entry
from bench.session_api.sessions import QueueTimeout, Session, _json_output
from judge import effects_object, state_hash
from judge import state_diff as diff


# ---- request validation ----------------------------------------------------------
def test_create_body_is_lax_like_the_reference() -> None:
    body = CreateBody.model_validate(
        {
            "session_id": "s",
            "server_config": {},
            "available_tools": [],
            "timeout": "30",
            "always_json_output": "yes",
            "x": 1,
        }
    )
    assert body.timeout == 30.0 and body.always_json_output is True and body.geteffects_proxy_info is False
    assert (
        CreateBody.model_validate({"session_id": "", "server_config": {}, "available_tools": []}).timeout
        == 120.0
    )


@pytest.mark.parametrize(
    "data",
    [
        {"session_id": 123, "server_config": {}, "available_tools": []},  # a number is no string
        {"session_id": "s", "server_config": {"a": []}, "available_tools": []},  # entries are objects
        {"session_id": "s", "server_config": {"a": None}, "available_tools": []},
        {"session_id": "s", "server_config": {}},  # available_tools required
        {"session_id": "s", "server_config": {}, "available_tools": [], "timeout": "soon"},
    ],
)
def test_create_body_rejects(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CreateBody.model_validate(data)


def test_call_and_gc_bodies_need_their_fields() -> None:
    with pytest.raises(ValidationError):
        CallBody.model_validate({"session_id": "s", "tool_name": "get_order"})
    with pytest.raises(ValidationError):
        GcBody.model_validate({})


# ---- envelope -----------------------------------------------------------------------
def test_envelope_is_compact_ordered_and_raw_unicode() -> None:
    r = ok({"b": 1, "a": "é"})
    assert r.body == '{"success":true,"content":{"type":"object","value":{"b":1,"a":"é"}}}'.encode()
    assert r.media_type == "application/json" and r.status_code == 200
    assert ok("Ok").body == b'{"success":true,"content":{"type":"string","value":"Ok"}}'
    bad = fail("Session does not exist")
    assert bad.status_code == 400
    assert json.loads(bad.body) == {
        "success": False,
        "content": {"type": "string", "value": "Session does not exist"},
    }
    slow = timed_out(108)
    assert slow.status_code == 504
    assert json.loads(slow.body)["content"]["value"] == "Tool call timed out after 108.0 seconds"
    assert json.loads(timed_out(7.2).body)["content"]["value"] == "Tool call timed out after 7.2 seconds"


# ---- schemas ---------------------------------------------------------------------------
def test_schema_refs_inlined_defs_and_titles_dropped() -> None:
    schema = {
        "title": "Args",
        "type": "object",
        "$defs": {"Kind": {"enum": ["a", "b"], "type": "string", "title": "Kind"}},
        "properties": {
            "kind": {"$ref": "#/$defs/Kind", "description": "dropped beside a $ref"},
            "n": {"type": "integer", "title": "N", "examples": [1]},
            "deep": {"type": "object", "properties": {"x": {"title": "X", "type": "string"}}},
        },
    }
    out = normalise_schema(schema)
    assert "$defs" not in out and "title" not in out
    assert out["properties"]["kind"] == {"enum": ["a", "b"], "type": "string"}  # a member: its title goes
    assert out["properties"]["n"] == {"type": "integer", "examples": [1]}
    assert out["properties"]["deep"]["properties"]["x"]["title"] == "X"  # deeper titles stay
    assert schema["properties"]["kind"]["$ref"] == "#/$defs/Kind"  # the input is not changed


def test_schema_bad_refs_fail() -> None:
    with pytest.raises(SchemaError, match="Missing definition"):
        normalise_schema({"properties": {"a": {"$ref": "#/$defs/Nope"}}})
    with pytest.raises(SchemaError, match="Circular reference"):
        normalise_schema({"$defs": {"A": {"$ref": "#/$defs/A"}}, "properties": {"a": {"$ref": "#/$defs/A"}}})


# ---- diff -----------------------------------------------------------------------------
def test_diff_follows_the_reference_rules() -> None:
    result = {"t": [{"id": "1", "s": "open", "n": 1}], "u": [], "v": [{"id": "9", "x": None}]}
    golden = {"t": [{"id": "1", "s": "solved", "n": 1.0}, {"id": "2"}], "u": [], "v": [{"id": "9", "x": 3}]}
    assert diff(result, golden) == [
        {"path": "t", "type": "length mismatch", "result": 1, "golden": 2},
        {"path": "t[0].n", "type": "type mismatch", "result": "int", "golden": "float"},
        {"path": "t[0].s", "type": "value mismatch", "result": "open", "golden": "solved"},
        {"path": "t[1]", "type": "missing in result (present in golden)"},
        {"path": "v[0].x", "type": "result is None, golden is not", "result": None, "golden": "int"},
    ]
    assert diff({"a": [True]}, {"a": [1]}) == [
        {"path": "a[0]", "type": "type mismatch", "result": "bool", "golden": "int"}
    ]
    assert diff({"a": 1, "b": 2}, {"a": 1}) == [
        {"path": "b", "type": "present in result (missing in golden)"}
    ]
    assert diff(golden, golden) == []


def test_effects_object_keys_hashes_and_rubrics() -> None:
    a, b = {"t": [{"id": "1"}]}, {"t": [{"id": "1"}, {"id": "2"}]}
    e = effects_object(a, a, b, rubrics=None, rubrics_yesno=None)
    assert list(e) == [
        "initial_db_state",
        "result_db_state",
        "result_db_hash",
        "golden_db_state",
        "golden_db_hash",
        "diff",
        "rubrics",
    ]
    assert e["result_db_hash"] == state_hash(a) != e["golden_db_hash"] == state_hash(b)
    assert e["diff"] and e["rubrics"] is None
    same = effects_object(a, b, b, rubrics={}, rubrics_yesno=["q?"])
    assert (
        same["diff"] == []
        and same["result_db_hash"] == same["golden_db_hash"]
        and same["rubrics_yesno"] == ["q?"]
    )


def test_effects_of_a_state_holding_non_finite_numbers_serialise() -> None:
    # No tool or patch stores one; whatever a row holds, the effects are still an answer.
    nan, inf = float("nan"), float("inf")
    result = {"t": [{"id": "1", "x": nan, "y": -inf}]}
    golden = {"t": [{"id": "1", "x": float("nan"), "y": inf}]}
    e = effects_object(result, result, golden, rubrics=None, rubrics_yesno=None)
    body = json.loads(ok(e).body)["content"]["value"]
    assert body["result_db_state"] == {"t": [{"id": "1", "x": "NaN", "y": "-Infinity"}]}
    assert body["diff"] == [
        {"path": "t[0].y", "type": "value mismatch", "result": "-Infinity", "golden": "Infinity"}
    ]
    assert body["result_db_hash"] == state_hash(result)  # the hash of the state itself, not of its text form


# ---- server_config ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench(dataset: Path) -> Any:
    return load_benchmark(dataset, strict=False)


def test_parse_entry_of_a_benchmark_task(bench: Any) -> None:
    task = next(t for t in bench.tasks if t.server == "external_booking_v1" and t.has_rubrics)
    raw = bench.effective_init(task).raw
    entry = parse_entry(bench, task.server, raw)
    assert entry.domain == "travel"  # tbx short name
    assert entry.golden_calls == bench.golden_calls(task)
    assert entry.rubrics == {} and entry.rubrics_yesno == list(
        raw["rubrics_yesno"]
    )  # null -> {} on this server
    assert entry.sources and all("snippets" in s for s in entry.sources)
    patched = next(iter(raw["data_patch"]))
    assert len(entry.rows[patched]) >= len(raw["data_patch"][patched])
    scenario_tools = bench.scenario_of(task).tool_names
    check_tools(entry, scenario_tools)
    with pytest.raises(ApiError, match="Tool nosuch does not exist"):
        check_tools(entry, [*scenario_tools, "nosuch"])


def test_parse_entry_errors(bench: Any) -> None:
    with pytest.raises(ApiError) as unknown:
        parse_entry(bench, "sandbox_retail", {})
    assert unknown.value.message.startswith("Server sandbox_retail does not exist")
    assert "sandbox_external_retail" in unknown.value.message  # lists the served ones
    with pytest.raises(ApiError, match=r"Error calling sandbox_external_retail init: .*no_such_table"):
        parse_entry(bench, "sandbox_external_retail", {"data_patch": {"no_such_table": [{"id": "x"}]}})
    with pytest.raises(ApiError) as patch:
        parse_entry(bench, "sandbox_external_retail", {"data_patch": {"no_such_table": [{"id": "x"}]}})
    assert patch.value.message.count("Data patch validation failed") == 1, patch.value.message
    retail = parse_entry(bench, "sandbox_external_retail", {"rubrics": None})
    assert retail.rubrics is None and retail.rubrics_yesno is None  # passed through, no yes/no key


def test_always_json_output() -> None:
    assert _json_output('{"a": 1}') == '{"a": 1}'
    assert _json_output("[1]") == "[1]"
    assert _json_output("Error!\nnot found é") == '{"result": "Error!\\nnot found \\u00e9"}'


# ---- the queue ----------------------------------------------------------------------------
def _session(timeout: float) -> Session:
    return Session("s", CreateBody(session_id="s", server_config={}, available_tools=[], timeout=timeout))


def test_queue_runs_in_arrival_order_one_at_a_time() -> None:
    async def main() -> list[int]:
        session, order, running = _session(5.0), [], [0]

        async def op(i: int) -> int:
            running[0] += 1
            assert running[0] == 1  # never two at once
            await asyncio.sleep(0.01)
            order.append(i)
            running[0] -= 1
            return i

        results = []
        for i in range(8):
            results.append(asyncio.ensure_future(session.run(lambda i=i: op(i))))
            await asyncio.sleep(0)  # arrival order = creation order
        assert [await r for r in results] == list(range(8))
        return order

    assert asyncio.run(main()) == list(range(8))


def test_queued_call_that_timed_out_is_never_executed() -> None:
    async def main() -> None:
        session, executed = _session(0.3), []  # wait limit 2.3 s

        async def slow(tag: str) -> str:
            executed.append(tag)
            await asyncio.sleep(10)  # held until the execution limit (0.3 s) cuts it
            return tag

        # Ten slow ops hold the queue 10 x 0.3 s = 3 s, past the last one's 2.3 s wait.
        t0 = time.monotonic()
        jobs = [asyncio.ensure_future(session.run(lambda i=i: slow(f"a{i}"))) for i in range(10)]
        await asyncio.sleep(0)
        late = asyncio.ensure_future(session.run(lambda: slow("late")))
        for job in [*jobs, late]:
            with pytest.raises(QueueTimeout):
                await job
        waited = time.monotonic() - t0
        assert 2.2 < waited < 3.5
        await asyncio.sleep(1.0)  # whatever was still queued has had every chance to run
        assert "late" not in executed
        assert executed == [f"a{i}" for i in range(len(executed))]  # the started ones, in order
        # the session stays usable
        assert await session.run(lambda: asyncio.sleep(0, result="ok")) == "ok"

    asyncio.run(main())


# ---- /health follows the Docker daemon --------------------------------------------------
def test_health_fails_while_the_docker_daemon_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import httpx

    from bench.session_api.app import SessionApi, build_app
    from bench.session_api.health import DaemonProbe

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")

    async def main() -> tuple[int, str, str | None]:
        probe = DaemonProbe()
        problem = await probe.problem()
        app = build_app(SessionApi(None, probe.problem))  # type: ignore[arg-type]  # /health needs no table
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            r = await c.get("/health")
        return r.status_code, r.text, problem

    status, text, problem = asyncio.run(main())
    assert problem is not None and problem.startswith("Docker daemon unavailable")
    assert status == 503 and text.startswith("Docker daemon unavailable")


# ---- bodies the envelope could not answer, bodies too deep to parse -------------------------
def _app_with(session: Session) -> Any:
    from types import SimpleNamespace

    from bench.session_api.app import SessionApi, build_app

    def get(session_id: str) -> Session:
        if session_id != session.id:
            raise ApiError("Session does not exist")
        return session

    table = SimpleNamespace(sessions={session.id: session}, get=get)
    return build_app(SessionApi(table, lambda: asyncio.sleep(0)))  # type: ignore[arg-type]


def _post_all(app: Any, requests: list[tuple[str, bytes]]) -> list[Any]:
    import httpx

    async def main() -> list[Any]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return [
                await c.post(path, content=body, headers={"X-TB-Session-Id": "s"}) for path, body in requests
            ]

    return asyncio.run(main())


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_session_info_refuses_a_non_finite_number_and_stays_answerable(number: bytes) -> None:
    app = _app_with(_session(30.0))
    bad, later = _post_all(
        app,
        [
            ("/session_info", b'{"session_id":"s","update":{"x":' + number + b"}}"),
            ("/session_info", b'{"session_id":"s","update":{"y":1}}'),
        ],
    )
    assert (bad.status_code, bad.json()["content"]["value"]) == (400, "Invalid input")
    assert later.status_code == 200 and later.json()["content"]["value"] == {"y": 1}


def test_a_body_nested_too_deeply_is_a_400_on_every_route() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    info, mcp = _post_all(_app_with(_session(30.0)), [("/session_info", deep), ("/mcp/", deep)])
    assert (info.status_code, info.json()["content"]["value"]) == (400, "Invalid input")
    assert mcp.status_code == 400
    assert mcp.json()["error"]["message"].startswith("Invalid input")
