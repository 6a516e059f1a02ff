"""bench.dataset: loading the shared ThinkingBox-Bench export, the .py checkout layout,
and clear problems for malformed inputs.

The real data is read from the shared export (never copied here): $TBX_DATASET or
<repo>/../shared/benchmarks/thinkingbox-bench-v1. Missing data is a failure.
"""

from __future__ import annotations

import functools
import io
import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.cli.tasks import validate_command
from bench.dataset import (
    CHECK_DATABASE,
    CHECK_RUBRICS,
    Benchmark,
    DatasetError,
    Problem,
    effective_init,
    format_problems,
    load_benchmark,
    merge_init_config,
    parse_py_test_file,
    recursive_merge,
    validate_benchmark,
)
from servers.registry import load_domain

REPO = Path(__file__).resolve().parents[4]
DATASET = Path(os.environ.get("TBX_DATASET") or REPO.parent / "shared/benchmarks/thinkingbox-bench-v1")
RELEASE = "releases/testlist_thinkingbox_bench_v1.yaml"
DOMAIN_COUNTS = {"retail": 98, "auto_insurance": 100, "consulting": 101, "travel": 104, "neobank": 104}
KNOWN_RETAIL_TASK = "sandbox_external_retail_group1.py:test_case_ST002_003"


# ---------------------------------------------------------------- real shared export


@pytest.fixture(scope="module")
def root() -> Path:
    if not (DATASET / "dataset" / "test_case").is_dir() or not (DATASET / RELEASE).is_file():
        pytest.fail(
            f"ThinkingBox-Bench v1 data not found at {DATASET} (expected dataset/ and {RELEASE}); "
            "set TBX_DATASET to the shared export folder"
        )
    return DATASET


@pytest.fixture(scope="module")
def bench(root: Path) -> Benchmark:
    start = time.perf_counter()
    b = load_benchmark(root)
    elapsed = time.perf_counter() - start
    print(f"loaded {b.summary()} in {elapsed:.2f}s")
    return b


@functools.cache
def _raw_yaml(path: Path) -> Any:
    """Parsed once per file (read-only use)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _raw_test_case(root: Path, task_id: str) -> dict[str, Any]:
    """The test case as written in the export (read independently of the loader)."""
    file_name, uid = task_id.split(":")
    stem = file_name.removesuffix(".py")
    (path,) = (root / "dataset" / "test_case").rglob(f"{stem}.yaml")
    (case,) = [c for c in _raw_yaml(path)["test_cases"] if c["uid"] == uid]
    return case


def test_real_export_loads_release_tasks_in_order(bench: Benchmark, root: Path) -> None:
    release_ids = _raw_yaml(root / RELEASE)
    assert len(release_ids) == 507
    assert bench.layout == "export"
    assert bench.ok, format_problems(bench.errors)
    assert bench.release == RELEASE
    assert bench.release_ids == release_ids
    assert [t.id for t in bench.tasks] == release_ids
    assert bench.test_case_count == 577 and len(bench.test_cases) == 577
    assert sorted(bench.scenarios) == sorted(p.stem for p in (root / "dataset/scenario").glob("*.yaml"))
    assert len(bench.scenarios) == 5
    assert "think" in bench.agents and bench.agents["think"].system_instructions
    for task in bench.tasks:
        assert task.id == f"{task.file}:{task.uid}"
        assert task.server == task.scenario
        assert task.checks[0] == CHECK_DATABASE
        assert task.golden, task.id


def test_per_domain_counts(bench: Benchmark) -> None:
    assert {d: len(ts) for d, ts in bench.by_domain().items()} == DOMAIN_COUNTS


def test_rubric_variants_replace_base_tasks(bench: Benchmark) -> None:
    release = set(bench.release_ids)
    variants = [t for t in bench.tasks if t.file.endswith("_rubrics_yesno.py")]
    assert len(variants) == 30
    for task in variants:
        base_id = f"{task.file.replace('_rubrics_yesno', '')}:{task.uid}"
        base = bench.task(base_id)  # the base test exists but is not in the release
        assert base_id not in release
        assert task.rubrics and not base.rubrics
        assert task.has_rubrics and CHECK_RUBRICS not in base.checks
        assert task.init[task.server].data_patch == base.init[base.server].data_patch  # type: ignore[index]
        assert task.golden == base.golden
    # every other release task has no rubric
    assert all(not t.rubrics for t in bench.tasks if t not in variants)


def test_effective_init_merges_scenario_world_state(bench: Benchmark, root: Path) -> None:
    seen_domains = set()
    for task in bench.tasks:
        scenario = bench.scenario_of(task)
        eff = bench.effective_init(task)
        raw = _raw_test_case(root, task.id)["init"][task.server] if task.domain not in seen_domains else None
        # sources come from the scenario file, in its order
        raw_scenario = scenario.world_state[task.server]  # type: ignore[index]
        assert [s.name for s in eff.sources] == [s["name"] for s in raw_scenario["sources"]]
        assert all(s.snippets for s in eff.sources)
        # v1.0 scenarios have null data_patch/golden: the test's values are used unchanged
        own = task.init[task.server]  # type: ignore[index]
        assert eff.data_patch == own.data_patch
        assert eff.golden_tool_interactions == own.golden_tool_interactions
        assert eff.rubrics_yesno == own.rubrics_yesno
        assert "sources" in eff.raw and "sources" not in own.raw
        if raw is not None:  # one task per domain: compare with the file itself
            seen_domains.add(task.domain)
            assert eff.data_patch == (raw["data_patch"] or {})
            assert eff.raw["data_patch"] == raw["data_patch"]
            # the function form agrees, and each call is a fresh copy
            again = effective_init(task, scenario)
            assert again == eff and again.data_patch is not eff.data_patch
    assert seen_domains == set(DOMAIN_COUNTS)


def test_golden_interactions_of_a_retail_task(bench: Benchmark, root: Path) -> None:
    task = bench.task(KNOWN_RETAIL_TASK)
    assert task.domain == "retail" and task.scenario == "sandbox_external_retail"
    raw = _raw_test_case(root, KNOWN_RETAIL_TASK)
    calls = raw["init"]["sandbox_external_retail"]["golden_test_case"]["tool_interactions"]
    assert [g.tool for g in task.golden] == [c["tool"] for c in calls]
    assert [g.parameters for g in task.golden] == [c["parameters"] for c in calls]
    assert [g.tool for g in task.golden][:3] == ["get_customer_profile", "get_order", "zendesk_get_items"]
    assert set(task.init["sandbox_external_retail"].golden_tools) <= set(
        bench.scenarios[task.scenario].tool_names
    )
    assert task.query == raw["query"] and task.user_context == raw["user_context"]


def test_seed_rows(bench: Benchmark, root: Path) -> None:
    seed = bench.seed("sandbox_external_retail")
    assert seed == json.loads((root / "servers/mcp_sandbox_external_retail/seed.json").read_text())
    assert bench.seed("mcp_sandbox_external_retail") == seed
    assert all(isinstance(rows, list) for rows in seed.values())


def test_validate_command_on_real_data(root: Path) -> None:
    out = io.StringIO()
    assert validate_command(root, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("507 tasks in release list, 577 test cases, 5 scenarios: OK")
    assert lines[-2] == f"release {RELEASE} (checked): 507 tasks, tbx runs 507"
    # the only remarks are warnings about the five development files outside the release
    assert all(": warning: " in line for line in lines[:-2])


# ---------------------------------------------------------------- merge rules (canonicalization.md 7)


def test_recursive_merge_rules() -> None:
    a: dict[str, Any] = {"d": {"x": 1, "l": [1]}, "l": [1, 2], "s": 1, "keep": "a", "n": {"k": 1}}
    b: dict[str, Any] = {"d": {"y": 2, "l": [2]}, "l": [3], "s": 2, "n": None, "new": [0]}
    merged = recursive_merge(a, b)
    assert merged == {
        "d": {"x": 1, "l": [1, 2], "y": 2},
        "l": [1, 2, 3],
        "s": 2,
        "keep": "a",
        "n": None,
        "new": [0],
    }
    assert a["l"] == [1, 2] and b["l"] == [3]  # inputs untouched
    merged["d"]["l"].append(9)
    assert a["d"]["l"] == [1]
    # an empty/null scenario server config takes the test's config as is
    assert merge_init_config({"s": None, "t": {"k": [1]}}, {"s": {"a": 1}, "t": {"k": [2]}}) == {
        "s": {"a": 1},
        "t": {"k": [1, 2]},
    }


# ---------------------------------------------------------------- synthetic fixtures

# A scenario of its own on a real tbx server (a task tbx has no domain for is an error),
# with rows of one of its simplest tables.
SERVER = "sandbox_external_retail"
TABLE = "external_retail_toolset_netsuite_models_inventory_records"


def item(sku: str) -> dict[str, Any]:
    return {"sku": sku, "available_quantity": 1, "reserved_quantity": 0}


SCENARIO = {
    "world_state": {
        SERVER: {
            "sources": [{"name": "policy.md", "snippets": ["synthetic policy"]}],
            "data_patch": {TABLE: [item("seed-1")]},
            "golden_test_case": None,
            "rubrics": None,
        }
    },
    "tools": [{"name": "get_item"}, {"name": "set_item", "override_description": "synthetic"}],
    "bot_instructions": "synthetic instructions",
}


def good_case(uid: str, **overrides: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "uid": uid,
        "scenario": "demo",
        "query": f"synthetic query {uid}",
        "user_context": "synthetic context",
        "init": {
            SERVER: {
                "data_patch": {TABLE: [item(f"{uid}-1")], "zendesk_tickets": []},
                "golden_test_case": {
                    "tool_interactions": [
                        {"tool": "get_item", "parameters": {"id": f"{uid}-1"}},
                        {"tool": "set_item", "parameters": {"id": f"{uid}-1", "v": 2}},
                    ]
                },
            }
        },
        "checks": [CHECK_DATABASE],
    }
    case.update(overrides)
    return case


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8"
    )


def make_export(
    tmp: Path, cases: list[dict[str, Any]] | str, release: list[str] | None = None, file: str = "demo_group1"
) -> Path:
    write(tmp / "dataset/scenario/demo.yaml", SCENARIO)
    write(tmp / "dataset/agent/think.yaml", {"system_instructions": "synthetic", "builtin_tools": []})
    write(
        tmp / f"dataset/test_case/demo/{file}.yaml",
        cases if isinstance(cases, str) else {"test_cases": cases},
    )
    if release is None and not isinstance(cases, str):
        release = [f"{file}.py:{c['uid']}" for c in cases]
    if release is not None:
        write(tmp / "releases/testlist_demo.yaml", release)
    write(tmp / f"servers/mcp_{SERVER}/seed.json", json.dumps({TABLE: [item("seed-1")]}))
    return tmp


def errors_of(problems: list[Problem]) -> list[str]:
    return [str(p) for p in problems if p.is_error]


def test_synthetic_export_and_scenario_merge(tmp_path: Path) -> None:
    bench = load_benchmark(make_export(tmp_path, [good_case("t_1"), good_case("t_2")]))
    assert [t.id for t in bench.tasks] == ["demo_group1.py:t_1", "demo_group1.py:t_2"]
    task = bench.tasks[0]
    assert (
        task.domain == "retail"
        and task.server == SERVER
        and task.source == "dataset/test_case/demo/demo_group1.yaml"
    )
    eff = bench.effective_init(task)
    # dicts merge, lists concatenate (scenario rows first)
    assert eff.data_patch == {TABLE: [item("seed-1"), item("t_1-1")], "zendesk_tickets": []}
    assert [s.name for s in eff.sources] == ["policy.md"]
    assert eff.golden_tools == ["get_item", "set_item"]
    assert bench.scenarios["demo"].tools[1].override_description == "synthetic"
    assert bench.seed(SERVER) == {TABLE: [item("seed-1")]}


# ---------------------------------------------------------------- .py checkout layout (ast, never executed)

PY_TASK_FILE = '''\
import nonexistent_module_that_must_not_be_imported

raise SystemExit("this file must never be executed")

"""!
scenario: demo
tags: [group:base]
"""


def validate_database(x):
    assert x


def helper_without_yaml(x):
    """A plain docstring: not a test."""


def test_one(x, judge):
    """!
    query: synthetic question one
    user_context: |-
      line one
      line two
    tags: [case:one]
    init:
      sandbox_external_retail:
        data_patch:
          external_retail_toolset_netsuite_models_inventory_records:
          - {sku: one-1, available_quantity: 1, reserved_quantity: 0}
        golden_test_case:
          tool_interactions:
          - tool: get_item
            parameters:
              id: one-1
    """
    validate_database(x)


def test_two(x, judge):
    """!
    scenario: demo
    query: synthetic question two
    max_user_sim_turns: 3
    init:
      sandbox_external_retail:
        data_patch: {}
        golden_test_case:
          tool_interactions:
          - tool: set_item
            parameters: {id: two-1}
        rubrics_yesno:
        - synthetic rubric?
    """
    validate_database(x)
    validate_rubrics_yesno(x, judge)


def test_three_custom(x, judge):
    """!
    query: synthetic question three
    init:
      sandbox_external_retail:
        data_patch: {}
    """
    assert "something" in x.response
'''


def make_checkout(tmp: Path, py_text: str = PY_TASK_FILE) -> Path:
    write(tmp / "dataset/scenario/demo.yaml", SCENARIO)
    write(tmp / "dataset/agent/think.yaml", {"system_instructions": "synthetic"})
    write(tmp / "dataset/test_case/demo/demo_group1.py", py_text)
    write(tmp / "releases/testlist_demo.yaml", ["demo_group1.py:test_two", "demo_group1.py:test_one"])
    toolslib = tmp / "servers/tb_pkg/tb_pkg/toolslib"
    retail = load_domain("retail")
    for spec in retail.tables:
        write(toolslib / retail.seed_file(spec.name), "[]")
    write(toolslib / retail.seed_file(TABLE), json.dumps([item("seed-1")]))
    return tmp


def test_py_docstring_layout_parsed_with_ast(tmp_path: Path) -> None:
    bench = load_benchmark(make_checkout(tmp_path), strict=False)
    assert bench.layout == "checkout"
    assert not bench.errors, format_problems(bench.errors)
    assert bench.test_case_count == 3
    assert [t.id for t in bench.tasks] == ["demo_group1.py:test_two", "demo_group1.py:test_one"]
    two, one = bench.tasks
    # module-level YAML gives the scenario; tags lists are concatenated
    assert one.scenario == "demo" and one.tags == ["group:base", "case:one"]
    assert two.tags == ["group:base"] and two.max_user_sim_turns == 3
    assert one.user_context == "line one\nline two"
    assert [g.tool for g in one.golden] == ["get_item"] and one.golden[0].parameters == {"id": "one-1"}
    # checks inferred from the function bodies
    assert one.checks == [CHECK_DATABASE]
    assert two.checks == [CHECK_DATABASE, CHECK_RUBRICS] and two.rubrics == ["synthetic rubric?"]
    three = bench.task("demo_group1.py:test_three_custom")
    assert three.checks == ["custom_python"]
    assert bench.effective_init(one).data_patch == {TABLE: [item("seed-1"), item("one-1")]}
    assert bench.initial_data()["external_retail_toolset/netsuite"] == {"inventory_records": [item("seed-1")]}
    # derived through the table's row model: defaults filled in, as the export's seed.json has them
    defaults = {"warehouse_location": None, "restock_date": None, "expected_restock_quantity": None}
    assert bench.seed(SERVER)[TABLE] == [{**item("seed-1"), **defaults}]
    assert all(bench.seed(SERVER)[t.name] == [] for t in load_domain("retail").tables if t.name != TABLE)


def test_py_module_defaults_apply_only_after_their_position() -> None:
    text = textwrap.dedent(
        '''
        def test_before():
            """!
            query: q0
            """

        """!
        scenario: later
        """

        def test_after():
            """!
            query: q1
            scenario: own
            """

        def test_default():
            """!
            query: q2
            """
        '''
    )
    cases, problems = parse_py_test_file(text, "x.py")
    assert problems == []
    assert [(c["uid"], c.get("scenario")) for c in cases] == [
        ("test_before", None),
        ("test_after", "own"),
        ("test_default", "later"),
    ]


def test_py_bad_docstring_yaml_names_file_and_test(tmp_path: Path) -> None:
    bad = PY_TASK_FILE.replace("    query: synthetic question one\n", "    query: [unclosed\n")
    root = make_checkout(tmp_path, bad)
    problems = validate_benchmark(root)
    errors = errors_of(problems)
    assert len(errors) == 1, errors
    line = PY_TASK_FILE.splitlines().index("    query: synthetic question one") + 1
    assert errors[0].startswith(
        "dataset/test_case/demo/demo_group1.py: test_one: docstring: invalid YAML at line "
    )
    assert f"started at line {line};" in errors[0]  # line numbers are the .py file's
    bench = load_benchmark(root, strict=False)
    assert [t.uid for t in bench.tasks] == ["test_two"]  # the good one still loads
    # and the broken test is not reported a second time as a missing release id
    assert not any("no such test case" in e for e in errors)


def test_py_syntax_error(tmp_path: Path) -> None:
    root = make_checkout(tmp_path, "def broken(:\n    pass\n")
    errors = errors_of(validate_benchmark(root))
    assert any(
        e.startswith("dataset/test_case/demo/demo_group1.py: not valid Python (line 1)") for e in errors
    )


# ---------------------------------------------------------------- malformed inputs


def test_invalid_yaml_file(tmp_path: Path) -> None:
    root = make_export(tmp_path, "test_cases:\n- uid: t_1\n  query: [oops\n", release=[])
    errors = errors_of(validate_benchmark(root))
    assert len(errors) == 1
    assert errors[0].startswith("dataset/test_case/demo/demo_group1.yaml: invalid YAML at line ")
    with pytest.raises(DatasetError) as exc:
        load_benchmark(root)
    assert "demo_group1.yaml: invalid YAML" in str(exc.value)


def test_data_patch_not_a_mapping(tmp_path: Path) -> None:
    bad = good_case("t_bad")
    bad["init"][SERVER]["data_patch"] = [{"id": 1}]
    errors = errors_of(validate_benchmark(make_export(tmp_path, [bad])))
    assert errors == [
        "dataset/test_case/demo/demo_group1.yaml: t_bad: init.sandbox_external_retail.data_patch: "
        "must be a mapping of table -> list of rows, got list"
    ]


def test_bad_rows_and_golden_without_tool_name(tmp_path: Path) -> None:
    bad = good_case("t_bad")
    bad["init"][SERVER]["data_patch"][TABLE] = [item("a"), "not a row"]
    bad["init"][SERVER]["data_patch"]["zendesk_tickets"] = {"id": 2}
    bad["init"][SERVER]["golden_test_case"]["tool_interactions"][1] = {"parameters": {"id": 1}}
    errors = errors_of(validate_benchmark(make_export(tmp_path, [bad])))
    prefix = "dataset/test_case/demo/demo_group1.yaml: t_bad: init.sandbox_external_retail."
    assert errors == [
        prefix + f"data_patch.{TABLE}[1]: row must be a mapping of column -> value, got string",
        prefix + "data_patch.zendesk_tickets: must be a list of rows (mappings), got mapping",
        prefix + "golden_test_case.tool_interactions[1].tool: missing tool name",
    ]


def test_wrong_field_types(tmp_path: Path) -> None:
    bad = good_case("t_bad", query=42, max_user_sim_turns="ten", tags="x", checks=["validate_everything"])
    errors = errors_of(validate_benchmark(make_export(tmp_path, [bad])))
    fields = [e.split(": ")[2] for e in errors]
    assert fields == ["query", "max_user_sim_turns", "tags", "checks[0]"]
    assert "must be a string, got integer" in errors[0]


def test_unknown_scenario(tmp_path: Path) -> None:
    root = make_export(tmp_path, [good_case("t_1"), good_case("t_2", scenario="no_such_scenario")])
    errors = errors_of(validate_benchmark(root))
    assert errors == [
        "dataset/test_case/demo/demo_group1.yaml: t_2: scenario: "
        "unknown scenario 'no_such_scenario' (no dataset/scenario/no_such_scenario.yaml)"
    ]


def test_golden_tool_not_in_scenario_tools(tmp_path: Path) -> None:
    bad = good_case("t_bad")
    bad["init"][SERVER]["golden_test_case"]["tool_interactions"][0]["tool"] = "drop_tables"
    errors = errors_of(validate_benchmark(make_export(tmp_path, [bad])))
    assert errors == [
        "dataset/test_case/demo/demo_group1.yaml: t_bad: init.sandbox_external_retail.golden_test_case.tool_interactions[0].tool: "
        "tool 'drop_tables' is not in scenario 'demo''s tools list"
    ]


def test_one_bad_task_among_good_ones(tmp_path: Path) -> None:
    bad = good_case("t_bad")
    bad["init"][SERVER]["data_patch"] = "oops"
    cases = [good_case("t_1"), bad, good_case("t_3"), good_case("t_4", scenario="missing")]
    root = make_export(tmp_path, cases)
    with pytest.raises(DatasetError) as exc:
        load_benchmark(root)
    assert len(errors_of(list(exc.value.problems))) == 2
    message = str(exc.value)
    assert (
        "dataset/test_case/demo/demo_group1.yaml: t_bad: init.sandbox_external_retail.data_patch: must be a mapping"
        in message
    )
    assert "dataset/test_case/demo/demo_group1.yaml: t_4: scenario: unknown scenario 'missing'" in message

    bench = load_benchmark(root, strict=False)
    assert [t.uid for t in bench.tasks] == ["t_1", "t_3"]
    assert {p.task for p in bench.errors} == {"t_bad", "t_4"}
    assert {p.field for p in bench.errors} == {"init.sandbox_external_retail.data_patch", "scenario"}


def test_release_id_without_task(tmp_path: Path) -> None:
    root = make_export(
        tmp_path,
        [good_case("t_1")],
        release=["demo_group1.py:t_1", "demo_group1.py:t_missing", "other_file.py:t_1", "not an id"],
    )
    errors = errors_of(validate_benchmark(root))
    assert errors == [
        "releases/testlist_demo.yaml: [3]: not a task id (<file>.py:<test name>): 'not an id'",
        "releases/testlist_demo.yaml: demo_group1.py:t_missing: no such test case: "
        "dataset/test_case/demo/demo_group1.yaml has no test named 't_missing'",
        "releases/testlist_demo.yaml: other_file.py:t_1: no such test case: "
        "no test-case file other_file.yaml/.py under dataset/test_case",
    ]
    assert [t.id for t in load_benchmark(root, strict=False).tasks] == ["demo_group1.py:t_1"]


def test_duplicate_uid_and_rubric_check_without_rubrics(tmp_path: Path) -> None:
    cases = [good_case("t_1"), good_case("t_1"), good_case("t_2", checks=[CHECK_DATABASE, CHECK_RUBRICS])]
    errors = errors_of(validate_benchmark(make_export(tmp_path, cases, release=["demo_group1.py:t_1"])))
    assert errors == [
        "dataset/test_case/demo/demo_group1.yaml: t_1: uid: duplicate test name (first defined as test_cases[0]); ignored",
        "dataset/test_case/demo/demo_group1.yaml: t_2: checks: "
        "validate_rubrics_yesno is requested but no init.<server>.rubrics_yesno is given",
    ]


def test_validate_command_reports_and_fails(tmp_path: Path) -> None:
    bad = good_case("t_bad")
    bad["init"][SERVER]["data_patch"] = 3
    out = io.StringIO()
    assert validate_command(make_export(tmp_path, [good_case("t_1"), bad]), out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines == [
        "dataset/test_case/demo/demo_group1.yaml: t_bad: init.sandbox_external_retail.data_patch: "
        "must be a mapping of table -> list of rows, got integer",
        "release releases/testlist_demo.yaml (checked): 2 tasks, tbx runs 1",
        "2 tasks in release list, 2 test cases, 1 scenarios: FAILED (1 error; 1 usable tasks)",
    ]


def test_not_a_benchmark_directory(tmp_path: Path) -> None:
    problems = validate_benchmark(tmp_path / "nowhere")
    assert len(problems) == 1 and "not a benchmark directory" in problems[0].message
    with pytest.raises(DatasetError, match="not a benchmark directory"):
        load_benchmark(tmp_path / "nowhere")
