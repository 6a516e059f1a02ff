"""What an attempt spec ships to a node holds no golden value (bench.rollout.brief).

A sample of every domain of the release: each task's golden end state is replayed
in-process (bench.replay.local, as tests/unit/bench/replay/test_golden_replay.py does) and its
golden-only values are collected: string and number leaves of the golden calls'
arguments and of the end state's new or changed rows, that occur nowhere in what
the task legitimately shows its attempt (query, the user's private context, bot
instructions, the agent prompt, the scenario's tools, the initial rows, the policy
documents), plus the rubric questions. None may appear in the serialized spec of
an LLM agent's attempt; the oracle's and chaos's specs carry the golden calls only
in the brief's marked `script`, and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from bench.dataset import Benchmark, Task
from bench.replay.local import replay_domain
from bench.rollout.brief import task_brief
from bench.rollout.prompts import default_prompt
from bench.run.attempt import AttemptSpec, attempt_spec
from judge import State

EVERY = 10  # every 10th task of each domain: ~50 tasks, every scenario family
MIN_LENGTH = 5  # shorter leaves ("open", 12) are not distinctive of anything


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield value


def _distinct(values: Any) -> set[str]:
    """The leaves as they are written in JSON (strings without quotes), long enough to mean something."""
    out = set()
    for leaf in _leaves(values):
        text = leaf if isinstance(leaf, str) else json.dumps(leaf)
        if len(text.strip()) >= MIN_LENGTH:
            out.add(json.dumps(text, ensure_ascii=False)[1:-1] if isinstance(leaf, str) else text)
    return out


def _changed_rows(initial: State, final: State) -> list[dict[str, Any]]:
    """Rows of the end state that the initial state does not hold as they are."""
    out = []
    for table, rows in final.items():
        before = {json.dumps(r, sort_keys=True, default=str) for r in initial.get(table, [])}
        out += [r for r in rows if json.dumps(r, sort_keys=True, default=str) not in before]
    return out


def _visible(bench: Benchmark, task: Task, spec: AttemptSpec, initial: State) -> str:
    """Everything the task legitimately shows its attempt, read from the dataset directly."""
    scenario = bench.scenario_of(task)
    prompt = bench.agents[default_prompt(bench)]
    shown = [
        task.id,
        task.query,
        task.user_context,
        scenario.bot_instructions,
        task.bot_instructions,
        prompt.system_instructions,
        prompt.builtin_tools,
        [t.model_dump() for t in scenario.tools],
        [s.model_dump() for s in bench.effective_init(task).sources],
        initial,
        spec.model_dump(mode="json")["seed"],  # the initial rows as they travel (ISO timestamps)
    ]
    return json.dumps(shown, ensure_ascii=False, default=str)


def _sample(bench: Benchmark) -> dict[str, list[Task]]:
    return {d: tasks[::EVERY] for d, tasks in sorted(bench.by_domain().items())}


@pytest.fixture(scope="module")
def end_states(
    benchmark: Benchmark, make_database: Callable[[str], psycopg.Connection[Any]]
) -> dict[str, tuple[State, State]]:
    """task id -> (initial, golden end state) of the sample, replayed in-process."""
    out: dict[str, tuple[State, State]] = {}
    for domain, tasks in _sample(benchmark).items():
        replay = replay_domain(
            make_database(f"brief_{domain}"),
            benchmark,
            domain,
            wanted=[t.id for t in tasks],
            keep_states=True,
        )
        for run in replay.tasks:
            assert run.initial is not None and run.final is not None and not run.errors, run.task_id
            out[run.task_id] = (run.initial, run.final)
    return out


def _spec(bench: Benchmark, task: Task, agent: str) -> AttemptSpec:
    spec = attempt_spec(bench, task, 1, run_id="run-brief", attempt_id="att-brief", agent=agent)
    return AttemptSpec.model_validate_json(spec.model_dump_json())  # as a node receives it


def test_no_golden_value_reaches_a_node(
    benchmark: Benchmark, end_states: dict[str, tuple[State, State]]
) -> None:
    sample = [t for tasks in _sample(benchmark).values() for t in tasks]
    assert {t.domain for t in sample} == set(benchmark.by_domain()) and len(sample) >= 45
    searched = in_init = leaks = 0
    problems = []
    for task in sample:
        initial, final = end_states[task.id]
        llm = _spec(benchmark, task, "llm")
        oracle = _spec(benchmark, task, "oracle")
        visible = _visible(benchmark, task, llm, initial)
        golden_calls = benchmark.golden_calls(task)
        candidates = _distinct([args for _, args in golden_calls]) | _distinct(_changed_rows(initial, final))
        golden = {v for v in candidates if v not in visible}
        rubrics = set(benchmark.effective_init(task).rubrics_yesno)
        searched += len(golden) + len(rubrics)
        for label, text in (
            ("llm", llm.model_dump_json()),
            # the oracle's golden calls travel in the brief's script, marked, and nowhere else
            ("oracle without its script", oracle.model_dump_json(exclude={"brief": {"script"}})),
        ):
            found = sorted(v for v in golden | rubrics if v in text)
            for key in ('"golden_tool_interactions"', '"rubrics_yesno"', '"rubrics"', '"golden'):
                if key in text:
                    found.append(key)
            if found:
                leaks += 1
                problems.append(f"{task.id} ({label}): {found[:5]}")
        # the search finds them in the task's own init, which a node used to read
        raw = json.dumps(benchmark.effective_init(task).model_dump(), ensure_ascii=False, default=str)
        in_init += sum(v in raw for v in golden | rubrics)
    assert not problems, f"{leaks} specs hold golden values:\n" + "\n".join(problems[:20])
    # not vacuous: hundreds of golden-only values, most of them in the init a node read before
    assert searched > 300 and in_init > 200, (searched, in_init)


def test_only_the_replaying_agents_carry_a_script_and_it_is_the_golden_calls(benchmark: Benchmark) -> None:
    for tasks in _sample(benchmark).values():
        task = tasks[0]
        golden = benchmark.golden_calls(task)
        oracle = _spec(benchmark, task, "oracle").brief
        assert oracle is not None and oracle.script is not None and oracle.script.agent == "oracle"
        assert [(tool, args) for tool, args in oracle.script.calls] == golden
        chaos = _spec(benchmark, task, "chaos:0.5").brief
        assert chaos is not None and chaos.script is not None and chaos.script.agent == "chaos"
        assert chaos.script.metadata["rate"] == 0.5
        for agent in ("noop", "llm", "think"):
            brief = _spec(benchmark, task, agent).brief
            assert brief is not None and brief.script is None, agent


def test_the_brief_is_what_the_local_loop_is_fed(benchmark: Benchmark) -> None:
    """One source: the spec's brief equals the one `run_attempt_agent` builds from the
    dataset in-process (both call task_brief), and it survives the JSON trip."""
    task = benchmark.tasks[0]
    spec = _spec(benchmark, task, "think")
    assert spec.brief == task_brief(benchmark, task, "think", seed=1)
    assert spec.brief is not None and spec.brief.query == task.query
    assert spec.brief.user_context == task.user_context
    assert spec.brief.system_prompts[0][0] == "agent:think"
    assert {t.name for t in spec.brief.scenario_tools} == set(spec.tool_policy.allowed_tools)
