"""The task tbx/thinkingbox_bench as Inspect builds it: its samples and sandbox spec, and a
clear error for bad parameters before any sandbox boots; the sandbox environment runs no
commands."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("inspect_ai")  # the `inspect` extra

from inspect_ai.util._sandbox.environment import SandboxUnavailableError
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from tbx.config import TbxConfig
from tbx.sandboxenv import TbxSandbox, tbx_config
from tbx.task import thinkingbox_bench


def test_one_sample_per_selected_task_each_in_a_tbx_sandbox() -> None:
    task = thinkingbox_bench(dataset=str(DEMO_PACK), domain="travel,neobank")
    samples = list(task.dataset)
    assert [s.metadata["domain"] for s in samples] == ["travel"] * 3 + ["neobank"] * 3
    assert all(s.id == s.metadata["task_id"] for s in samples)
    spec = samples[0].sandbox
    assert spec is not None and spec.type == "tbx"
    config = spec.config
    assert isinstance(config, TbxConfig)
    assert config.dataset == str(DEMO_PACK.resolve())
    assert config.tasks == tuple(s.id for s in samples)
    queries = {t.id: t.query for t in load_benchmark(DEMO_PACK).tasks}
    assert all(s.input == queries[str(s.id)] for s in samples)


def test_tasks_are_selected_by_id_in_release_order() -> None:
    ids = ["demo_travel.py:test_trv_cancel_denver_trip", "demo_retail.py:test_ret_expedite_headphones"]
    task = thinkingbox_bench(dataset=str(DEMO_PACK), tasks=",".join(ids))
    assert [s.id for s in task.dataset] == list(reversed(ids))  # retail comes first in the pack


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"tasks": "demo_retail.py:nope"}, "unknown task(s)"),
        ({"domain": "airline"}, "unknown domain(s) airline"),
        ({"release": "no_such_release"}, "no_such_release"),
    ],
)
def test_bad_parameters_are_clear_errors(args: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        thinkingbox_bench(dataset=str(DEMO_PACK), **args)


def test_no_dataset_says_how_to_name_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBX_DATASET", raising=False)
    with pytest.raises(ValueError, match="-T dataset="):
        thinkingbox_bench()


def test_the_config_survives_inspects_serialisation() -> None:
    config = TbxConfig(dataset="/x", tasks=("a", "b"), warm=1)
    assert tbx_config(config.model_dump()) == config
    assert TbxSandbox.config_deserialize(config.model_dump()) == config
    with pytest.raises(ValueError, match="TbxConfig"):
        tbx_config("compose.yaml")


def test_the_sandbox_runs_no_commands() -> None:
    env = TbxSandbox.__new__(TbxSandbox)
    for call in (env.exec(["id"]), env.read_file("/etc/passwd"), env.write_file("/tmp/x", "y")):
        with pytest.raises(SandboxUnavailableError, match="MCP tools"):
            asyncio.run(call)
