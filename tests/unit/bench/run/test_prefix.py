"""`bench.run.prefix`: a prefix parsed and checked at the boundary (shape, cap, the
allow-list, reserved tools), replayed through a held attempt's real tool proxy and
kept apart from the driver's own calls (`outcome.prefix` vs `outcome.calls`), and a
live attempt's calls so far taken as a fork's prefix (refused calls left out). Against
the fake provider of attempt_fakes (a database on the test PostgreSQL, the domain's real
server in process)."""

from __future__ import annotations

import contextlib

import pytest
from attempt_fakes import TASK, FakeProvider

from bench.dataset import Benchmark
from bench.run.attempt import attempt_spec
from bench.run.held import HeldAttempt
from bench.run.prefix import (
    MAX_PREFIX_CALLS,
    PrefixCall,
    PrefixInvalid,
    PrefixRefused,
    check_prefix,
    fork_calls,
    parse_prefix,
    replay_prefix,
    replayed_results,
)
from sandbox import ProxyServer, SandboxGoneError, ToolPolicy, UpstreamPool

LOOKUP = PrefixCall(tool="get_order", arguments={"order_id": "ORD-30000011"})


def test_a_prefix_is_parsed_and_bounded() -> None:
    assert parse_prefix(None) == []
    assert parse_prefix([{"tool": "get_order", "arguments": {"order_id": "X"}}]) == [
        PrefixCall(tool="get_order", arguments={"order_id": "X"})
    ]
    assert parse_prefix([{"tool": "get_order"}]) == [PrefixCall(tool="get_order")]
    with pytest.raises(PrefixInvalid, match=r"prefix\[0\]\.arguments"):
        parse_prefix([{"tool": "get_order", "arguments": "{}"}])  # arguments are an object
    with pytest.raises(PrefixInvalid, match=r"prefix\[0\]\.name"):
        parse_prefix([{"name": "get_order", "tool": "x"}])  # no other keys
    with pytest.raises(PrefixInvalid, match="at most 1000"):
        parse_prefix([{"tool": "get_order"}] * (MAX_PREFIX_CALLS + 1))


def test_a_tool_the_allow_list_forbids_is_refused_with_its_index() -> None:
    policy = ToolPolicy(allowed_tools=["get_order", "cancel_order"])
    check_prefix([LOOKUP, PrefixCall(tool="cancel_order")], policy)
    with pytest.raises(PrefixRefused, match=r"\[1\] 'drop_everything'") as refused:
        check_prefix([LOOKUP, PrefixCall(tool="drop_everything"), LOOKUP], policy)
    assert refused.value.refused == [(1, "drop_everything")]
    # reserved tools are refused whatever the policy (the proxy never offers them)
    with pytest.raises(PrefixRefused, match="__reserved__init"):
        check_prefix([PrefixCall(tool="__reserved__init")], ToolPolicy())
    check_prefix([PrefixCall(tool="anything")], ToolPolicy())  # no allow-list: the proxy decides
    with pytest.raises(PrefixInvalid):
        check_prefix([LOOKUP] * (MAX_PREFIX_CALLS + 1), policy)


async def test_a_replayed_prefix_is_kept_apart_from_the_drivers_calls(
    pack: Benchmark, provider: FakeProvider, proxy: ProxyServer, pools: dict[str, UpstreamPool]
) -> None:
    spec = attempt_spec(pack, pack.task(TASK), 0, run_id="run-prefix", attempt_id="prefix-1", agent="oracle")
    held = HeldAttempt(spec, provider, proxy)
    live = await held.open()
    bad = PrefixCall(tool="get_order", arguments={"order_id": 7})  # the server's error object
    replayed = await replay_prefix(held, [LOOKUP, bad])
    assert [(c.tool, c.outcome) for c in replayed] == [("get_order", "ok"), ("get_order", "ok")]
    results = replayed_results(replayed)
    assert results[0]["tool_error"] is None and "ORD-30000011" in results[0]["result"]
    assert results[1]["tool_error"] == "execution_error"  # replayed as is, and reported
    # the driver's own call, as the Session API makes one
    mark = held.recorded()
    with contextlib.suppress(SandboxGoneError):
        await proxy.acall(live.token, "get_customer_profile", {"customer_id": "nobody"}, pools)
    await held.check_call("get_customer_profile", mark)
    # a fork's prefix: every call so far, in order (a refused one left out)
    with contextlib.suppress(SandboxGoneError):
        await proxy.acall(live.token, "__reserved__init", {}, pools)
    assert live.calls()[-1].outcome == "refused"
    assert [(c.tool, c.arguments) for c in fork_calls(live.calls())] == [
        ("get_order", {"order_id": "ORD-30000011"}),
        ("get_order", {"order_id": 7}),
        ("get_customer_profile", {"customer_id": "nobody"}),
    ]
    assert await held.close() is None
    out = held.outcome
    assert [c.arguments for c in out.prefix] == [LOOKUP.arguments, {"order_id": 7}]
    assert out.prefix[1].error_envelope
    assert [c.tool for c in out.calls] == ["get_customer_profile", "__reserved__init"]
