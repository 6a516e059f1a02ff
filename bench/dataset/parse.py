"""Raw mappings (from YAML or docstrings) -> models, with one Problem per bad field.

Nothing here raises on bad data: every function returns ``(model | None, problems)``
so a caller can keep going and report everything at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .domains import domain_of
from .errors import Problem, Severity
from .models import (
    CHECK_RUBRICS,
    KNOWN_CHECKS,
    AgentPrompt,
    PolicySource,
    Scenario,
    ScenarioTool,
    ServerInit,
    Task,
    ToolInteraction,
)

# keys the harness parser / TestCase model know, plus the export's ``checks``
TEST_CASE_KEYS = frozenset(
    {
        "uid",
        "scenario",
        "query",
        "user_context",
        "max_user_sim_turns",
        "max_agent_sim_turns",
        "bot_instructions",
        "history",
        "init",
        "format_query",
        "tags",
        "checks",
        "metadata",
        "test_code",
    }
)
SCENARIO_KEYS = frozenset({"world_state", "tools", "bot_instructions", "tags", "fixtures", "metadata"})


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


class Collector:
    """Problems of one file / one test case."""

    def __init__(self, path: str, task: str | None = None) -> None:
        self.path = path
        self.task = task
        self.problems: list[Problem] = []

    def add(self, field: str | None, message: str, severity: Severity = "error") -> None:
        self.problems.append(
            Problem(path=self.path, task=self.task, field=field, message=message, severity=severity)
        )

    def pydantic(self, exc: ValidationError, prefix: str | None) -> None:
        for err in exc.errors():
            loc = prefix or ""
            for part in err["loc"]:
                loc = f"{loc}[{part}]" if isinstance(part, int) else (f"{loc}.{part}" if loc else str(part))
            self.add(loc or None, err["msg"])

    @property
    def failed(self) -> bool:
        return any(p.is_error for p in self.problems)


# ---------------------------------------------------------------- server init


def _data_patch(value: Any, c: Collector, field: str) -> dict[str, list[dict[str, Any]]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        c.add(field, f"must be a mapping of table -> list of rows, got {type_name(value)}")
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for table, rows in value.items():
        tfield = f"{field}.{table}"
        if not isinstance(table, str):
            c.add(field, f"table names must be strings, got {type_name(table)} {table!r}")
            continue
        if not isinstance(rows, list):
            c.add(tfield, f"must be a list of rows (mappings), got {type_name(rows)}")
            continue
        good = True
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                c.add(f"{tfield}[{i}]", f"row must be a mapping of column -> value, got {type_name(row)}")
                good = False
        if good:
            out[table] = rows
    return out


def _golden(value: Any, c: Collector, field: str) -> list[ToolInteraction]:
    if value is None:
        return []
    if not isinstance(value, dict):
        c.add(field, f"must be a mapping with tool_interactions, got {type_name(value)}")
        return []
    calls = value.get("tool_interactions")
    tfield = f"{field}.tool_interactions"
    if calls is None:
        return []
    if not isinstance(calls, list):
        c.add(tfield, f"must be a list of {{tool, parameters}} mappings, got {type_name(calls)}")
        return []
    out: list[ToolInteraction] = []
    for i, call in enumerate(calls):
        cfield = f"{tfield}[{i}]"
        if not isinstance(call, dict):
            c.add(cfield, f"must be a mapping with tool and parameters, got {type_name(call)}")
            continue
        tool = call.get("tool")
        params = call.get("parameters")
        ok = True
        if not isinstance(tool, str) or not tool.strip():
            c.add(
                f"{cfield}.tool",
                "missing tool name"
                if tool in (None, "")
                else f"tool name must be a string, got {type_name(tool)}",
            )
            ok = False
        if params is not None and not isinstance(params, dict):
            c.add(f"{cfield}.parameters", f"must be a mapping of argument -> value, got {type_name(params)}")
            ok = False
        if ok:
            out.append(ToolInteraction(tool=tool, parameters=params or {}))
    return out


def _str_list(value: Any, c: Collector, field: str, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        c.add(field, f"must be a list of {what}, got {type_name(value)}")
        return []
    bad = [i for i, v in enumerate(value) if not isinstance(v, str)]
    for i in bad:
        c.add(f"{field}[{i}]", f"must be a string, got {type_name(value[i])}")
    return [] if bad else list(value)


def _sources(value: Any, c: Collector, field: str) -> list[PolicySource]:
    if value is None:
        return []
    if not isinstance(value, list):
        c.add(field, f"must be a list of {{name, snippets}} mappings, got {type_name(value)}")
        return []
    out: list[PolicySource] = []
    for i, src in enumerate(value):
        sfield = f"{field}[{i}]"
        if not isinstance(src, dict):
            c.add(sfield, f"must be a mapping with name and snippets, got {type_name(src)}")
            continue
        name = src.get("name")
        if not isinstance(name, str) or not name:
            c.add(f"{sfield}.name", f"must be a non-empty string, got {type_name(name)}")
            continue
        snippets = src.get("snippets")
        if isinstance(snippets, str):
            snippets = [snippets]
        out.append(PolicySource(name=name, snippets=_str_list(snippets, c, f"{sfield}.snippets", "strings")))
    return out


def parse_server_init(
    raw: Any, *, path: str, task: str | None = None, field: str = "init"
) -> tuple[ServerInit | None, list[Problem]]:
    """Validate one server's init config (``data_patch``, ``golden_test_case``, ...)."""
    c = Collector(path, task)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        c.add(field, f"must be a mapping (server init config), got {type_name(raw)}")
        return None, c.problems
    data_patch = _data_patch(raw.get("data_patch"), c, f"{field}.data_patch")
    golden = _golden(raw.get("golden_test_case"), c, f"{field}.golden_test_case")
    rubrics_yesno = _str_list(
        raw.get("rubrics_yesno"), c, f"{field}.rubrics_yesno", "yes/no questions (strings)"
    )
    rubrics = raw.get("rubrics")
    if rubrics is not None and not isinstance(rubrics, list):
        c.add(f"{field}.rubrics", f"must be a list, got {type_name(rubrics)}")
        rubrics = None
    sources = _sources(raw.get("sources"), c, f"{field}.sources")
    if c.failed:
        return None, c.problems
    try:
        model = ServerInit(
            data_patch=data_patch,
            golden_tool_interactions=golden,
            rubrics_yesno=rubrics_yesno,
            rubrics=rubrics or [],
            sources=sources,
            raw=raw,
        )
    except ValidationError as exc:  # pragma: no cover - the checks above mirror the model
        c.pydantic(exc, field)
        return None, c.problems
    return model, c.problems


# ---------------------------------------------------------------- test case


def task_id(file_name: str, uid: str) -> str:
    """``<stem>.py:<uid>`` - the release list's id format, whatever the file's suffix."""
    stem = file_name.rsplit(".", 1)[0] if file_name.endswith((".py", ".yaml", ".yml")) else file_name
    return f"{stem}.py:{uid}"


def parse_test_case(raw: Any, *, path: str, file: str, index: int) -> tuple[Task | None, list[Problem]]:
    """Validate one test-case mapping; ``file`` is the ``<stem>.py`` name used in ids."""
    label = f"test_cases[{index}]"
    if isinstance(raw, dict) and isinstance(raw.get("uid"), str) and raw["uid"].strip():
        label = raw["uid"]
    c = Collector(path, label)
    if not isinstance(raw, dict):
        c.add(None, f"test case must be a mapping, got {type_name(raw)}")
        return None, c.problems

    uid = raw.get("uid")
    if not isinstance(uid, str) or not uid.strip():
        c.add(
            "uid",
            "missing test name (uid)" if uid in (None, "") else f"must be a string, got {type_name(uid)}",
        )
    elif ":" in uid or uid != uid.strip():
        c.add("uid", f"must not contain ':' or surrounding spaces: {uid!r}")

    for key in raw:
        if key not in TEST_CASE_KEYS:
            c.add(str(key), "unknown test-case field (the harness ignores it)", "warning")

    def string(name: str, required: bool) -> str | None:
        v = raw.get(name)
        if v is None:
            if required:
                c.add(name, "missing (required string)")
            return None
        if not isinstance(v, str):
            c.add(name, f"must be a string, got {type_name(v)}")
            return None
        if required and not v.strip():
            c.add(name, "must not be empty")
        return v

    scenario = string("scenario", True)
    query = string("query", True)
    user_context = string("user_context", False)
    bot_instructions = string("bot_instructions", False)

    def count(name: str) -> int | None:
        v = raw.get(name)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            c.add(name, f"must be a non-negative integer, got {type_name(v)} {v!r}")
            return None
        return v

    max_user = count("max_user_sim_turns")
    max_agent = count("max_agent_sim_turns")

    format_query = raw.get("format_query", False)
    if not isinstance(format_query, bool):
        c.add("format_query", f"must be true or false, got {type_name(format_query)}")
        format_query = False
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        c.add("metadata", f"must be a mapping, got {type_name(metadata)}")
        metadata = None
    tags = _str_list(raw.get("tags"), c, "tags", "strings")
    test_code = string("test_code", False)

    checks = raw.get("checks")
    if checks is None:
        c.add("checks", f"missing: a list of {', '.join(KNOWN_CHECKS)}")
        checks = []
    else:
        checks = _str_list(checks, c, "checks", "check names")
        for i, name in enumerate(checks):
            if name not in KNOWN_CHECKS:
                c.add(f"checks[{i}]", f"unknown check {name!r} (known: {', '.join(KNOWN_CHECKS)})")
        if not checks and "checks" in raw:
            c.add("checks", "empty: the task could never fail")

    init: dict[str, ServerInit] = {}
    raw_init = raw.get("init")
    if raw_init is not None and not isinstance(raw_init, dict):
        c.add("init", f"must be a mapping of server -> init config, got {type_name(raw_init)}")
    elif raw_init:
        for server, cfg in raw_init.items():
            if cfg is None or not isinstance(cfg, dict):
                c.add(f"init.{server}", f"must be a mapping (server init config), got {type_name(cfg)}")
                continue
            parsed, probs = parse_server_init(cfg, path=path, task=c.task, field=f"init.{server}")
            c.problems.extend(probs)
            if parsed is not None:
                init[str(server)] = parsed

    if CHECK_RUBRICS in checks and not c.failed and not any(s.rubrics_yesno for s in init.values()):
        c.add("checks", f"{CHECK_RUBRICS} is requested but no init.<server>.rubrics_yesno is given")

    if c.failed:
        return None, c.problems
    assert isinstance(uid, str) and scenario is not None and query is not None
    server = next(iter(init)) if len(init) == 1 else None
    try:
        task = Task(
            id=task_id(file, uid),
            file=file,
            uid=uid,
            source=path,
            scenario=scenario,
            domain=domain_of(scenario, server),
            server=server,
            query=query,
            user_context=user_context,
            init=init,
            checks=checks,
            tags=tags,
            max_user_sim_turns=max_user,
            max_agent_sim_turns=max_agent,
            bot_instructions=bot_instructions,
            history=raw.get("history"),
            format_query=format_query,
            metadata=metadata or {},
            test_code=test_code,
            raw=raw,
        )
    except ValidationError as exc:  # pragma: no cover - the checks above mirror the model
        c.pydantic(exc, None)
        return None, c.problems
    return task, c.problems


def test_case_entries(data: Any, path: str) -> tuple[list[Any], list[Problem]]:
    """The ``test_cases`` list of a YAML test-case file (harness ``TestCaseFile``)."""
    c = Collector(path)
    if not isinstance(data, dict) or "test_cases" not in data:
        c.add(None, f"must be a mapping with a test_cases list (TestCaseFile), got {type_name(data)}")
        return [], c.problems
    for key in data:
        if key != "test_cases":
            c.add(str(key), "unknown top-level field (expected only test_cases)", "warning")
    entries = data["test_cases"]
    if entries is None:
        return [], c.problems
    if not isinstance(entries, list):
        c.add("test_cases", f"must be a list of test cases, got {type_name(entries)}")
        return [], c.problems
    return entries, c.problems


# ---------------------------------------------------------------- scenario / agent


def parse_scenario(raw: Any, *, path: str, name: str) -> tuple[Scenario | None, list[Problem]]:
    c = Collector(path)
    if not isinstance(raw, dict):
        c.add(None, f"scenario must be a mapping, got {type_name(raw)}")
        return None, c.problems
    for key in raw:
        if key not in SCENARIO_KEYS:
            c.add(str(key), "unknown scenario field (the harness ignores it)", "warning")

    world_state: dict[str, dict[str, Any]] = {}
    sources: dict[str, list[PolicySource]] = {}
    ws = raw.get("world_state")
    if not isinstance(ws, dict):
        c.add("world_state", f"must be a mapping of server -> init config, got {type_name(ws)}")
    else:
        for server, cfg in ws.items():
            parsed, probs = parse_server_init(cfg, path=path, field=f"world_state.{server}")
            c.problems.extend(probs)
            if parsed is not None:
                world_state[str(server)] = cfg if isinstance(cfg, dict) else {}
                sources[str(server)] = parsed.sources

    tools: list[ScenarioTool] = []
    raw_tools = raw.get("tools")
    if not isinstance(raw_tools, list):
        c.add("tools", f"must be a list of {{name: ...}} mappings, got {type_name(raw_tools)}")
    else:
        seen: set[str] = set()
        for i, entry in enumerate(raw_tools):
            if not isinstance(entry, dict):
                c.add(f"tools[{i}]", f"must be a mapping with a name, got {type_name(entry)}")
                continue
            try:
                tool = ScenarioTool.model_validate(entry)
            except ValidationError as exc:
                c.pydantic(exc, f"tools[{i}]")
                continue
            if tool.name in seen:
                c.add(f"tools[{i}].name", f"duplicate tool {tool.name!r}")
            seen.add(tool.name)
            tools.append(tool)

    bot = raw.get("bot_instructions")
    if bot is not None and not isinstance(bot, str):
        c.add("bot_instructions", f"must be a string, got {type_name(bot)}")
    for key in ("fixtures", "metadata"):
        v = raw.get(key)
        if v is not None and not isinstance(v, dict):
            c.add(key, f"must be a mapping, got {type_name(v)}")
    if c.failed:
        return None, c.problems
    return (
        Scenario(
            name=name,
            path=path,
            world_state=world_state,
            tools=tools,
            bot_instructions=bot,
            sources=sources,
            tags=raw.get("tags"),
            fixtures=raw.get("fixtures") or {},
            metadata=raw.get("metadata") or {},
        ),
        c.problems,
    )


def parse_agent(raw: Any, *, path: str, name: str) -> tuple[AgentPrompt | None, list[Problem]]:
    c = Collector(path)
    if not isinstance(raw, dict):
        c.add(None, f"agent prompt must be a mapping, got {type_name(raw)}")
        return None, c.problems
    si = raw.get("system_instructions")
    if not isinstance(si, str):
        c.add("system_instructions", f"must be a string, got {type_name(si)}")
    bt = raw.get("builtin_tools")
    if bt is not None and (not isinstance(bt, list) or not all(isinstance(t, dict) for t in bt)):
        c.add("builtin_tools", "must be a list of tool definitions (mappings)")
    ptc = raw.get("parallel_tool_calls")
    if ptc is not None and not isinstance(ptc, bool):
        c.add("parallel_tool_calls", f"must be true or false, got {type_name(ptc)}")
    if c.failed or not isinstance(si, str):
        return None, c.problems
    return (
        AgentPrompt(
            name=name,
            path=path,
            system_instructions=si,
            builtin_tools=bt or [],
            parallel_tool_calls=ptc,
            raw=raw,
        ),
        c.problems,
    )
