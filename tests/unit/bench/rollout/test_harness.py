"""Harness interventions' pure parts: the names (models config, --harness),
the bundle hash, and error-hints' categories on the servers' own error texts
(bench.rollout.harness); state-check and approval in the agent loop against a
small in-process MCP server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import FakeMcp, ModelScript, Steps, call, model_client, say, spec

from bench.harness_names import HarnessError, parse_harness
from bench.llm.config import ModelsConfigError, parse_models_config
from bench.rollout.agent_loop import run_loop
from bench.rollout.agents import LLMAgent, ScriptedUser
from bench.rollout.harness.approval import MAX_DESCRIPTION, needs_approval, question, refusal
from bench.rollout.harness.error_hints import UNCLASSIFIED, annotate, categorize
from bench.rollout.harness.hook import tool_message
from bench.rollout.harness.state_check import EXTRA_TURNS, MAX_ROWS, EffectsProbe, check_text
from bench.rollout.trajectory import ToolCall
from bench.rollout.user_sim import NO_REASON, STOP_TOKEN, parse_approval
from bench.run.output import bundle_hash
from judge import Effects, RowEffect, TableEffects
from servers.engine.tools import error_reply

# error texts as the domain servers and the proxy produce them (servers/*/tools, sandbox/proxy)
CASES = [
    ("Customer", "No customer found with email 'a@b.c'", "not_found"),
    ("Item", "Item with ID 'X1' not found in table 'TableName.tickets'", "not_found"),
    ("Promo", "Promotion code not found or expired: SPRING", "not_found"),
    ("Catalog", "No matching software found in catalog for: Visio", "not_found"),
    ("Input", "Input validation failed: order_id: Field required", "invalid_arguments"),
    ("VIN", "Invalid VIN format. VIN must be exactly 17 characters.", "invalid_arguments"),
    ("Either", "Either customer_id or booking_reference must be provided", "invalid_arguments"),
    ("Missing", "Missing required parameter: policy_id", "invalid_arguments"),
    ("Dup", "VIN '1HGCM82633A004352' already exists on this policy", "precondition_not_met"),
    ("Assoc", "Booking is not associated with this corporate account.", "precondition_not_met"),
    ("Stock", "No available laptop devices at Chicago", "precondition_not_met"),
    ("Immutable", "The value is not updatable. Ticket comments cannot be modified.", "not_permitted"),
    ("Denied", "Permission denied: approver lacks the role", "not_permitted"),
    ("Down", "Service temporarily unavailable", "transient"),
    ("Timeout", "the call timed out after 30 s", "transient"),
    ("Odd", "list index out of range", UNCLASSIFIED),
]


@pytest.mark.parametrize(("label", "message", "category"), CASES, ids=[c[0] for c in CASES])
def test_categories_of_server_errors(label: str, message: str, category: str) -> None:
    assert categorize(error_reply("some_tool", message)) == category


def test_annotate_keeps_the_reply_and_records_the_hint_beside_it() -> None:
    reply = error_reply("get_order", "Input validation failed: order_id: Field required")
    call = ToolCall(index=0, tool="get_order", result=reply, error_envelope=True)
    seen = tool_message(("error-hints",), call)
    assert call.result == reply  # byte-identical
    assert call.hint == "invalid_arguments"
    assert seen.startswith(reply) and "[tbx error hint] invalid arguments:" in seen[len(reply) :]
    ok = ToolCall(index=1, tool="get_order", result=json.dumps({"order_id": "ORD-1"}))
    assert tool_message(("error-hints",), ok) == ok.result and ok.hint is None
    odd = ToolCall(index=2, tool="x", result="Error: list index out of range", is_error=True)
    assert annotate(odd) == odd.result and odd.hint == UNCLASSIFIED
    # off: the reply as it is, nothing recorded
    plain = ToolCall(index=3, tool="get_order", result=reply, error_envelope=True)
    assert tool_message((), plain) == reply and plain.hint is None


def test_names_parse_and_refuse_clearly() -> None:
    assert parse_harness(None) == () and parse_harness("") == ()
    assert parse_harness("error-hints, error-hints") == ("error-hints",)
    assert parse_harness(["error-hints"]) == ("error-hints",)
    with pytest.raises(HarnessError, match=r"unknown harness 'retry'.*error-hints"):
        parse_harness("retry")
    assert parse_harness("state-check,error-hints") == ("error-hints", "state-check")
    assert parse_harness("approval,error-hints") == ("error-hints", "approval")
    with pytest.raises(HarnessError, match=r"unknown harness 'approve'.*approval"):
        parse_harness("approve")


def test_models_config_harness_is_validated_and_public_only_when_on() -> None:
    base = {"agent": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}}
    plain = parse_models_config(base)
    assert plain.harness == () and "harness" not in plain.public_dict()
    on = parse_models_config({**base, "harness": ["error-hints"]})
    assert on.harness == ("error-hints",) and on.public_dict()["harness"] == ["error-hints"]
    with pytest.raises(ModelsConfigError, match=r"harness.*unknown harness 'nope'"):
        parse_models_config({**base, "harness": "nope"})


def test_bundle_hash_changes_with_a_harness_and_not_without() -> None:
    manifest = {
        "git_commit": "c",
        "dataset_hash": "d",
        "image_digests": {},
        "agent": "oracle",
        "config": None,
        "policy_search": "hybrid",
    }
    plain = bundle_hash(manifest)
    assert bundle_hash({**manifest, "harness": []}) == plain  # a run without one hashes as before
    assert bundle_hash({**manifest, "harness": ["error-hints"]}) != plain


# -- state-check in the agent loop (a small real MCP server in-process) ----------


@pytest.fixture(scope="module")
def kv_server() -> Iterator[FakeMcp]:
    srv = FakeMcp().start()
    yield srv
    srv.stop()


@pytest.fixture
def fake(kv_server: FakeMcp) -> FakeMcp:
    kv_server.reset()
    return kv_server


def probe_of(store: dict[str, Any]) -> EffectsProbe:
    """Effects of the fake server's key-value store against an empty start, as the judge builds them."""

    async def probe() -> Effects:
        inserted = [RowEffect(key=k, after={"key": k, "value": v}) for k, v in sorted(store.items())]
        return Effects(tables={"kv": TableEffects(inserted=inserted)} if inserted else {})

    return probe


async def test_state_check_shows_the_effects_and_lets_the_agent_continue(fake: FakeMcp) -> None:
    agent = Steps(
        [
            call("set_value", {"key": "a", "value": 1}),
            say("All set. <DONE>"),
            call("set_value", {"key": "b", "value": 2}),  # after reading the check
            say("Now it is. <DONE>"),
        ]
    )
    loop = spec(harness=("state-check",), effects_probe=probe_of(fake.store))
    traj = await run_loop(loop, agent, ScriptedUser(), fake.url)
    assert traj.finish_reason == "done" and traj.final_message == "Now it is."
    assert fake.store == {"a": 1, "b": 2}
    check = [t for t in traj.user_turns if t.source == "harness"]
    assert len(check) == 1 and "[tbx state check]" in check[0].text
    assert 'inserted kv[a]: key="a", value=1' in check[0].text and "kv[b]" not in check[0].text
    assert traj.metadata["state_check"] == {
        "effects": {"kv": {"inserted": 1, "updated": 0, "deleted": 0}},
        "rows": 1,
        "agent_turn": 2,
    }
    # the agent read the check as a user message after its first end
    assert agent.seen[2][-1] == {"role": "user", "content": check[0].text}
    # a replay of this conversation's user side skips tbx's message
    assert ScriptedUser.from_trajectory(traj).replies == []


async def test_state_check_is_bounded_and_once(fake: FakeMcp) -> None:
    agent = Steps([say("Done. <DONE>")] + [call("get_value", {"key": "a"})] * 20)
    loop = spec(harness=("state-check",), effects_probe=probe_of(fake.store))
    traj = await run_loop(loop, agent, ScriptedUser(), fake.url)
    assert traj.finish_reason == "agent_limit"
    assert traj.agent_turns == 1 + EXTRA_TURNS
    assert "(no record was changed)" in traj.user_turns[-1].text

    confirm = Steps([say("Done. <DONE>"), say("Confirmed. <DONE>")])
    traj = await run_loop(loop, confirm, ScriptedUser(), fake.url)
    assert traj.finish_reason == "done" and traj.agent_turns == 2
    assert [t.source for t in traj.user_turns] == ["query", "harness"]


async def test_without_state_check_the_loop_ends_at_the_first_done(fake: FakeMcp) -> None:
    agent = Steps([say("Done. <DONE>"), say("never asked")])
    traj = await run_loop(spec(effects_probe=probe_of(fake.store)), agent, ScriptedUser(), fake.url)
    assert traj.finish_reason == "done" and traj.agent_turns == 1
    assert [t.source for t in traj.user_turns] == ["query"] and "state_check" not in traj.metadata


def test_check_text_lists_updates_and_bounds_its_size() -> None:
    effects = Effects(
        tables={
            "orders": TableEffects(
                updated=[RowEffect(key="O1", before={"status": "open"}, after={"status": "closed"})],
                deleted=[RowEffect(key="O2", before={"status": "x"})],
                inserted=[RowEffect(key=f"N{i}", after={"note": "y" * 500}) for i in range(60)],
            )
        }
    )
    text = check_text(effects)
    assert 'updated orders[O1]: status: "open" -> "closed"' in text and "deleted orders[O2]" in text
    assert f"and {62 - MAX_ROWS} more changed rows" in text
    assert max(len(line) for line in text.splitlines()) < 200


def test_report_and_view_show_the_harness(tmp_path: Path) -> None:
    from bench.report.build import build_report
    from bench.report.markdown import render_markdown
    from bench.report.tables import summary_rows
    from bench.view.load import open_runs

    run = tmp_path / "hinted"
    run.mkdir()
    row = {"task_id": "retail:1", "repeat": 0, "domain": "retail", "passed": True}
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    (run / "manifest.json").write_text(
        json.dumps({"agent": "llm", "harness": ["error-hints", "state-check"]})
    )
    report = build_report([run])
    assert report.runs[0].harness == ["error-hints", "state-check"]
    assert summary_rows(report)[1][0][1] == "llm + error-hints, state-check"
    assert "agent: llm + error-hints, state-check" in render_markdown(report)
    (loaded,) = open_runs([run])
    assert loaded.harness == ["error-hints", "state-check"]


# -- approval ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "approved", "reason"),
    [
        ("APPROVE", True, NO_REASON),
        ("APPROVE - yes, that is the refund I asked for.", True, "yes, that is the refund I asked for."),
        ("**Approved**: go ahead", True, "go ahead"),
        ("yes please", True, "please"),
        ("REFUSE: I want a replacement, not a refund.", False, "I want a replacement, not a refund."),
        ("Refused. Wrong order.", False, "Wrong order."),
        ("No, not that one.", False, "not that one."),
        ("Hmm, I am not sure.", False, "Hmm, I am not sure."),  # no clear yes is no consent
        ("", False, NO_REASON),
        (f"APPROVE thanks {STOP_TOKEN}", True, "thanks"),
    ],
)
def test_approval_answers_parse(raw: str, approved: bool, reason: str) -> None:
    assert parse_approval(raw) == (approved, reason)


def test_only_destructive_calls_are_held_and_the_question_is_the_call() -> None:
    actions = {"type": "object", "properties": {"action": {"enum": ["get_x", "retire_x"]}}}
    assert needs_approval("create_refund", {"type": "object"}, {"amount": 5})
    assert not needs_approval("get_order", {"type": "object"}, {})
    assert not needs_approval("update_order_address", {"type": "object"}, {})
    assert not needs_approval("create_refund", None, {})  # not listed: the endpoint answers it
    assert not needs_approval("x_api", actions, {"action": "get_x"})
    assert needs_approval("x_api", actions, {"action": "retire_x"})
    q = question("create_refund", "Issue a refund.\n  Pending at first. " + "x" * 900, {"amount": 5.5})
    assert q.splitlines()[0] == "tool: create_refund"
    assert q.splitlines()[1].startswith("what it does: Issue a refund. Pending at first. x")
    assert len(q.splitlines()[1]) <= len("what it does: ") + MAX_DESCRIPTION
    assert q.splitlines()[2] == 'details: {"amount": 5.5}'
    assert categorize(refusal("create_refund", "wrong order")) == "not_permitted"


@pytest.fixture(scope="module")
def kvd_server() -> Iterator[FakeMcp]:
    srv = FakeMcp(delete=True).start()
    yield srv
    srv.stop()


@pytest.fixture
def kvd(kvd_server: FakeMcp) -> FakeMcp:
    kvd_server.reset()
    return kvd_server


async def test_approval_holds_a_destructive_call_until_the_user_approves(kvd: FakeMcp) -> None:
    kvd.store.update({"a": 1})
    agent = Steps(
        [
            call("get_value", {"key": "a"}, "c0"),  # read: no question
            call("set_value", {"key": "b", "value": 2}, "c1"),  # a plain write: no question
            call("delete_value", {"key": "a"}, "c2"),  # refused
            call("delete_value", {"key": "a"}, "c3"),  # approved
            say("Removed. <DONE>"),
        ]
    )
    user = ScriptedUser(approvals=["REFUSE I still need that value.", "APPROVE fine, remove it."])
    traj = await run_loop(spec(harness=("approval",)), agent, user, kvd.url)
    assert traj.finish_reason == "done"
    # the refused call never reached the server; the approved one did, unchanged
    assert kvd.calls == [
        ("get_value", {"key": "a"}),
        ("set_value", {"key": "b", "value": 2}),
        ("delete_value", {"key": "a"}),
    ]
    assert kvd.store == {"b": 2}
    read, write, refused, approved = traj.tool_calls
    assert read.approval is None and write.approval is None
    assert refused.approval is not None and not refused.approval.approved
    assert refused.approval.reason == "I still need that value."
    assert refused.approval.question.startswith("tool: delete_value\nwhat it does: Remove a value for good.")
    assert (refused.via_mcp, refused.is_error) == (False, True)
    assert refused.result == refusal("delete_value", "I still need that value.")
    assert approved.approval is not None and approved.approval.approved and approved.via_mcp
    assert approved.result == '{"deleted": true}' and not approved.is_error
    # the model read the refusal as the tool's reply, and the approved reply as it came
    tool_msgs = [m for m in agent.seen[-1] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs][2:] == [refused.result, approved.result]
    assert traj.metadata["approval"] == {"asked": 2, "approved": 1, "refused": 1}
    # the exchange is beside the calls, not in the chat; a replay answers the same
    assert [t.source for t in traj.user_turns] == ["query"]
    assert ScriptedUser.from_trajectory(traj).approvals == [
        "REFUSE I still need that value.",
        "APPROVE fine, remove it.",
    ]
    # tbx view marks both beside their calls
    from bench.view.pages import conversation

    page = "".join(conversation(traj))
    assert 'data-approval="refused"' in page and 'data-approval="approved"' in page
    assert "I still need that value." in page


async def test_without_approval_nothing_is_held_and_a_user_that_cannot_approve_is_refused(
    kvd: FakeMcp,
) -> None:
    kvd.store.update({"a": 1})
    traj = await run_loop(
        spec(), Steps([call("delete_value", {"key": "a"}), say("ok <DONE>")]), ScriptedUser(), kvd.url
    )
    assert kvd.store == {} and traj.tool_calls[0].approval is None and "approval" not in traj.metadata

    class Mute:
        async def reply(self, transcript: Any, *, index: int) -> Any:
            raise AssertionError("not asked")

    with pytest.raises(ValueError, match="'approval' needs a user that can approve"):
        await run_loop(spec(harness=("approval",)), Steps([]), Mute(), kvd.url)


async def test_the_simulated_user_is_asked_with_its_private_context(kvd: FakeMcp) -> None:
    from bench.llm.client import UsageLedger
    from bench.rollout.user_sim import LLMUser

    kvd.store.update({"a": 1})
    script = ModelScript(
        agent=[
            {"role": "assistant", "content": "Shall I remove a?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "delete_value", "arguments": '{"key": "a"}'},
                    }
                ],
            },
            {"role": "assistant", "content": "It stays. <DONE>"},
        ],
        user=["Yes, remove it.", "REFUSE: I said a, but I meant the copy."],
    )
    ledger = UsageLedger()
    agent = LLMAgent(model_client(script, "agent-m", "agent"), parallel_tool_calls=False, ledger=ledger)
    user = LLMUser(model_client(script, "user-m", "user"), "You want the copy of a removed.", ledger=ledger)
    traj = await run_loop(spec(harness=("approval",)), agent, user, kvd.url, ledger=ledger)
    assert traj.finish_reason == "done" and kvd.store == {"a": 1}
    (rec,) = traj.tool_calls
    assert rec.approval is not None and rec.approval.source == "llm" and not rec.approval.approved
    asked = [r for r in script.requests if r["model"] == "user-m"][-1]
    assert rec.approval.prompt == asked["messages"]
    content = asked["messages"][1]["content"]
    assert "You want the copy of a removed." in content and "Shall I remove a?" in content
    assert "tool: delete_value" in content and 'details: {"key": "a"}' in content
    # the question is one more user-model call, in the usage like the chat's
    assert traj.usage["user"].calls == 2 and traj.usage["agent"].calls == 3


async def test_a_scripted_user_approves_once_its_answers_run_out() -> None:
    # so the built-in agents (oracle) pass with approval on
    user = ScriptedUser(approvals=["REFUSE not now"])
    first, second = [await user.approve([], "tool: x", index=i) for i in range(2)]
    assert (first.approved, first.reason, first.source) == (False, "not now", "scripted")
    assert second.approved and second.question == "tool: x"
