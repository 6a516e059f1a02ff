"""Load / validate a benchmark directory (export or ``thinkingbox-data`` checkout).

Directory shape (both layouts)::

    dataset/scenario/*.yaml          scenarios (name = file stem)
    dataset/agent/*.yaml             agent prompts (name = file stem)
    dataset/test_case/**/*.yaml      export: TestCaseFile (``test_cases: [...]``)
    dataset/test_case/**/*.py        checkout: task files, docstring YAML (see pyfile.py)
    releases/**/testlist*.yaml       release lists of ``<stem>.py:<uid>`` ids
    servers/...                      seeds (see seeds.py)

Every test case found is parsed; the *tasks* are the test cases named by the
release list, in its order (all test cases, in file order, if there is no
release list). Scenario references, server names, golden tool names and the
merged init are checked for the tasks; a test case outside the release whose
scenario is missing only gets a warning (the v1.0 data ships five such
development files).
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, PrivateAttr

from servers.engine.seeding import DataPatchError, validated_patch
from servers.engine.tools import Domain
from servers.registry import domain_names, load_domain, server_to_domain

from .checkout_seeds import checkout_seed
from .domains import server_module
from .errors import DatasetError, Problem, Severity, errors_only
from .merge import effective_init, effective_inits
from .models import CHECK_CUSTOM, AgentPrompt, Layout, Scenario, ServerInit, Task
from .parse import parse_agent, parse_scenario, parse_test_case, test_case_entries, type_name
from .pyfile import parse_py_test_file
from .seeds import check_seed, load_initial_data, load_seed
from .servers_yaml import SERVERS_YAML, DeclaredServer, ServersYaml, read_servers_yaml
from .yamlio import parse_yaml, read_text, yaml_error_message

DEFAULT_RELEASE = "testlist_thinkingbox_bench_v1.yaml"
DATASET_ENV = "TBX_DATASET"
_RELEASE_ID = re.compile(r"^[^\s:/]+\.py:[^\s:]+$")
DEMO_PACK = Path(__file__).resolve().parents[1] / "packs" / "demo"  # package data, installed too


def default_root() -> Path:
    """``$TBX_DATASET``; without it, a usage error (exit 2) that says how to get a benchmark."""
    env = os.environ.get(DATASET_ENV)
    if env:
        return Path(env).expanduser()
    raise DatasetError(
        [],
        f"tbx: no benchmark given: pass --dataset DIR or set {DATASET_ENV}=DIR. ThinkingBox-Bench: "
        "`git clone https://github.com/microsoft/thinkingbox-data && git -C thinkingbox-data checkout "
        f"thinkingbox-bench-v1.0`, then --dataset thinkingbox-data; to try tbx out: --dataset {DEMO_PACK}",
    )


Rows = dict[str, list[dict[str, Any]]]


class ReleaseSupport(BaseModel):
    """What tbx can run of one release list: its tasks, how many of them load and have a
    tbx domain, and the servers of the others (server -> task count)."""

    model_config = ConfigDict(frozen=True)

    tasks: int
    runnable: int
    unsupported_servers: dict[str, int] = {}


def _known_domain(name: str) -> Domain | None:
    """The tbx domain of a short name, server name or export module (``mcp_<server>``)."""
    for candidate in (name, name.removeprefix("mcp_")):
        if candidate in domain_names() or candidate in server_to_domain():
            return load_domain(candidate)
    return None


def _server_label(task: Task, scenario: Scenario | None) -> str:
    """The server a task runs on: its own init's, else its scenario's first."""
    servers = scenario.servers if scenario is not None else []
    return task.server or next(iter(task.init), None) or next(iter(servers), None) or task.scenario


class Benchmark(BaseModel):
    """A loaded benchmark. ``tasks`` are in release order; ``test_cases`` holds every
    parsed test case by id (file order), including those outside the release."""

    model_config = ConfigDict(frozen=True)

    root: Path
    layout: Layout
    scenarios: dict[str, Scenario]
    agents: dict[str, AgentPrompt]
    release: str | None
    release_ids: list[str]
    releases: dict[str, list[str]]
    tasks: list[Task]
    test_cases: dict[str, Task]
    test_case_count: int
    problems: list[Problem]
    release_support: dict[str, ReleaseSupport] = {}
    # The servers the checkout's servers/servers.yaml declares that tbx runs as they are
    # (no tbx domain: sandbox.checkout_server), by name.
    checkout_servers: dict[str, DeclaredServer] = {}
    # Base rows by export module, checked (and, in a checkout, derived) at load for every
    # domain of the selected tasks, so an attempt never reads or judges the data files.
    _seeds: dict[str, Rows] = PrivateAttr(default_factory=dict)

    # -- lookups
    def task(self, task_id: str) -> Task:
        try:
            return self.test_cases[task_id]
        except KeyError:
            raise KeyError(f"no test case {task_id!r} in {self.root}") from None

    def scenario_of(self, task: Task) -> Scenario:
        try:
            return self.scenarios[task.scenario]
        except KeyError:
            raise KeyError(f"task {task.id}: unknown scenario {task.scenario!r}") from None

    def by_domain(self) -> dict[str, list[Task]]:
        out: dict[str, list[Task]] = {}
        for t in self.tasks:
            out.setdefault(t.domain, []).append(t)
        return out

    def servers_of(self, task: Task) -> list[str]:
        """The task's servers in server_config order: the scenario's, then its init's own."""
        scen = self.scenario_of(task)
        return [*scen.servers, *(s for s in task.init if s not in scen.world_state)]

    def on_checkout_servers(self, task: Task) -> bool:
        """Whether the task runs on its checkout's own servers (no tbx domain)."""
        return task.domain not in domain_names() and all(
            s in self.checkout_servers for s in self.servers_of(task)
        )

    def effective_inits(self, task: Task) -> dict[str, ServerInit]:
        """Every server's effective init; freshly merged on each call (safe to mutate)."""
        return effective_inits(task, self.scenario_of(task))

    def effective_init(self, task: Task, server: str | None = None) -> ServerInit:
        """Scenario world_state merged with the task's init (sources included); a fresh copy."""
        return effective_init(task, self.scenario_of(task), server)

    def golden_calls(self, task: Task) -> list[tuple[str, dict[str, Any]]]:
        """The task's golden tool calls as (tool, arguments), in order (what the
        oracle plays and the golden end state is replayed from)."""
        init = self.effective_init(task)
        return [(c.tool, dict(c.parameters)) for c in init.golden_tool_interactions if c.tool]

    # -- seeds
    def seed(self, server_or_module: str) -> Rows:
        """Base tables ``{table: rows}`` of a server (by server name, export module or tbx
        domain): the export's ``servers/<module>/seed.json``, or in a checkout the rows
        derived from its ``initial_data`` files. A fresh copy of the tables' lists."""
        domain = _known_domain(server_or_module)
        module = server_or_module
        if not (self.root / "servers" / module).is_dir():
            module = domain.module if domain is not None else server_module(server_or_module)
        cached = self._seeds.get(module)
        if cached is None:
            cached = read_seed(self.root, self.layout, module, domain)
            self._seeds[module] = cached
        return {table: list(rows) for table, rows in cached.items()}

    def initial_data(self) -> dict[str, dict[str, Any]]:
        """Checkout layout: ``{module_dir: {stem: rows}}`` from ``servers/**/initial_data/*.json``."""
        return load_initial_data(self.root / "servers")

    # -- status
    @property
    def errors(self) -> list[Problem]:
        return errors_only(self.problems)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        head = (
            f"{len(self.release_ids)} tasks in release list"
            if self.release is not None
            else f"no release list ({len(self.tasks)} tasks)"
        )
        return f"{head}, {self.test_case_count} test cases, {len(self.scenarios)} scenarios"


# ---------------------------------------------------------------- reading


def read_seed(root: Path, layout: Layout, module: str, domain: Domain | None) -> Rows:
    """One server's base rows from the data (no cache); raises DatasetError naming each
    problem. A known domain's export seed is checked against its tables."""
    if layout == "checkout":
        if domain is None:
            raise DatasetError(
                [Problem(path="servers", message=f"tbx has no domain for server module {module!r}")]
            )
        return checkout_seed(root, domain)
    seed = load_seed(root, module)
    if domain is not None:
        problems = check_seed(root, domain, seed)
        if problems:
            raise DatasetError(problems)
    return seed


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _read_yaml(path: Path, rel: str, problems: list[Problem]) -> tuple[bool, Any]:
    try:
        return True, parse_yaml(read_text(path))
    except yaml.YAMLError as exc:
        problems.append(Problem(path=rel, message=yaml_error_message(exc)))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(path=rel, message=f"cannot read: {exc}"))
    return False, None


def _is_test_file(p: Path) -> bool:
    if p.name.startswith("."):
        return False
    if p.suffix == ".py":
        return p.name not in ("__init__.py", "conftest.py")
    return p.suffix in (".yaml", ".yml") and not p.name.endswith((".meta.yaml", ".meta.yml"))


class _Loaded:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Problem] = []
        self.scenarios: dict[str, Scenario] = {}
        self.agents: dict[str, AgentPrompt] = {}
        self.test_cases: dict[str, Task] = {}
        self.broken: set[str] = set()
        self.count = 0
        self.files: dict[str, str] = {}  # "<stem>.py" -> rel path
        self.layout: Layout = "export"
        self.releases: dict[str, list[str]] = {}
        self.release: str | None = None
        self.release_missing = False  # a release was asked for and not found: no task is selected
        self.tasks: list[Task] = []
        self.seeds: dict[str, Rows] = {}
        self.unsupported: Counter[str] = Counter()
        self.servers_yaml = ServersYaml()
        self.refused: Counter[tuple[str, str]] = Counter()  # (server, why) -> tasks

    def rel(self, p: Path) -> str:
        return _rel(p, self.root)

    def load_named_yaml_dir(self, sub: str, required: bool) -> list[tuple[Path, str, Any]]:
        folder = self.root / sub
        if not folder.is_dir():
            self.problems.append(
                Problem(path=sub, message="missing folder", severity="error" if required else "warning")
            )
            return []
        out = []
        for path in sorted(folder.glob("*.yaml")):
            rel = self.rel(path)
            ok, raw = _read_yaml(path, rel, self.problems)
            if ok:
                out.append((path, rel, raw))
        return out

    def load_scenarios(self) -> None:
        for path, rel, raw in self.load_named_yaml_dir("dataset/scenario", required=True):
            scen, probs = parse_scenario(raw, path=rel, name=path.stem)
            self.problems.extend(probs)
            if scen is not None:
                self.scenarios[scen.name] = scen

    def load_agents(self) -> None:
        for path, rel, raw in self.load_named_yaml_dir("dataset/agent", required=False):
            agent, probs = parse_agent(raw, path=rel, name=path.stem)
            self.problems.extend(probs)
            if agent is not None:
                self.agents[agent.name] = agent

    def load_test_cases(self) -> None:
        folder = self.root / "dataset" / "test_case"
        if not folder.is_dir():
            self.problems.append(Problem(path="dataset/test_case", message="missing folder"))
            return
        paths = sorted((p for p in folder.rglob("*") if p.is_file() and _is_test_file(p)), key=self.rel)
        if any(p.suffix == ".py" for p in paths):
            self.layout = "checkout"
        for path in paths:
            self.load_test_case_file(path)

    def load_test_case_file(self, path: Path) -> None:
        rel = self.rel(path)
        file_name = f"{path.stem}.py"
        if file_name in self.files:
            self.problems.append(
                Problem(
                    path=rel,
                    message=f"same file name as {self.files[file_name]}: task ids ({file_name}:<uid>) would collide; skipped",
                )
            )
            return
        self.files[file_name] = rel
        entries: list[Any]
        if path.suffix == ".py":
            try:
                text = read_text(path)
            except (OSError, UnicodeDecodeError) as exc:
                self.problems.append(Problem(path=rel, message=f"cannot read: {exc}"))
                return
            entries, probs = parse_py_test_file(text, rel)
            self.problems.extend(probs)
        else:
            ok, raw = _read_yaml(path, rel, self.problems)
            if not ok:
                return
            entries, probs = test_case_entries(raw, rel)
            self.problems.extend(probs)

        first_index: dict[str, int] = {}
        for i, entry in enumerate(entries):
            self.count += 1
            uid = entry.get("uid") if isinstance(entry, dict) else None
            if isinstance(uid, str) and uid in first_index:
                self.problems.append(
                    Problem(
                        path=rel,
                        task=uid,
                        field="uid",
                        message=f"duplicate test name (first defined as test_cases[{first_index[uid]}]); ignored",
                    )
                )
                continue
            if isinstance(uid, str):
                first_index[uid] = i
            if isinstance(entry, dict) and entry.get("__broken__"):
                self.broken.add(f"{file_name}:{uid}")
                continue
            task, probs = parse_test_case(entry, path=rel, file=file_name, index=i)
            self.problems.extend(probs)
            if task is None:
                if isinstance(uid, str):
                    self.broken.add(f"{file_name}:{uid}")
                continue
            self.test_cases[task.id] = task

    def load_releases(self, wanted: str | Path | None) -> None:
        folder = self.root / "releases"
        lists = sorted(folder.rglob("testlist*.yaml")) if folder.is_dir() else []
        if wanted is not None:
            candidate = Path(wanted)
            if not candidate.is_absolute():
                candidate = self.root / candidate
            if candidate.is_file() and candidate not in lists:
                lists.append(candidate)
        for path in lists:
            self.read_release(path)
        if wanted is not None:
            names = {self.rel(p): p for p in lists}
            w = str(wanted)
            match = [r for r, p in names.items() if w in (r, p.name, p.stem) or p in (Path(w), self.root / w)]
            # A release is also named by its folder (releases/<name>/), as the data repository does.
            by_folder = [r for r, p in names.items() if p.parent.name == w and p.parent != folder]
            if not match and len(by_folder) == 1:
                match = by_folder
            if not match:
                self.release_missing = True
                self.problems.append(
                    Problem(
                        path="releases",
                        message=f"no release list {str(wanted)!r} (found: {', '.join(names) or 'none'})",
                    )
                )
                return
            self.release = match[0]
        elif len(lists) == 1:
            self.release = self.rel(lists[0])
        elif lists:
            default = [p for p in lists if p.name == DEFAULT_RELEASE]
            if default:
                self.release = self.rel(default[0])
            else:
                self.problems.append(
                    Problem(
                        path="releases",
                        message=f"several release lists ({', '.join(self.rel(p) for p in lists)}); choose one with release=",
                    )
                )

    def read_release(self, path: Path) -> None:
        rel = self.rel(path)
        ok, raw = _read_yaml(path, rel, self.problems)
        if not ok:
            return
        if not isinstance(raw, list):
            self.problems.append(
                Problem(path=rel, message=f"must be a list of task ids, got {type_name(raw)}")
            )
            return
        ids: list[str] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            if not isinstance(item, str) or not _RELEASE_ID.match(item):
                self.problems.append(
                    Problem(
                        path=rel, field=f"[{i}]", message=f"not a task id (<file>.py:<test name>): {item!r}"
                    )
                )
                continue
            if item in seen:
                self.problems.append(Problem(path=rel, task=item, field=f"[{i}]", message="listed twice"))
                continue
            seen.add(item)
            ids.append(item)
        self.releases[rel] = ids

    def select_tasks(self) -> None:
        if self.release_missing:
            return
        if self.release is None:
            candidates = list(self.test_cases.values())
        else:
            candidates = []
            for task_id in self.releases.get(self.release, []):
                task = self.test_cases.get(task_id)
                if task is not None:
                    candidates.append(task)
                elif task_id not in self.broken:  # broken ones are reported already
                    file_name, uid = task_id.split(":", 1)
                    hint = (
                        f"{self.files[file_name]} has no test named {uid!r}"
                        if file_name in self.files
                        else f"no test-case file {file_name[:-3]}.yaml/.py under dataset/test_case"
                    )
                    self.problems.append(
                        Problem(path=self.release, task=task_id, message=f"no such test case: {hint}")
                    )
        for task in candidates:
            checked = self.check_task(task)
            if checked is not None:
                self.tasks.append(checked)
                self.test_cases[checked.id] = checked
        self.report_unsupported()
        self.warn_unused_scenarios({t.id for t in candidates})

    def report_unsupported(self) -> None:
        for (server, why), n in sorted(self.refused.items()):
            self.problems.append(
                Problem(
                    path=SERVERS_YAML,
                    message=f"server {server!r} ({n} task{'s' if n != 1 else ''}): tbx cannot run it: {why}",
                )
            )
        if not self.unsupported:
            return
        known = ", ".join(sorted(server_to_domain()))
        for server, n in sorted(self.unsupported.items()):
            self.problems.append(
                Problem(
                    path=self.release or "dataset/test_case",
                    message=f"server {server!r}: tbx has no domain for it ({n} task{'s' if n != 1 else ''}); "
                    f"tbx runs {known}",
                )
            )

    def load_seeds(self) -> None:
        """Read and check the base rows of every domain the selected tasks use, then each
        task's data_patch against the tables, as seeding will: what an attempt would refuse is found
        here, before any sandbox boots (each problem names its file or task)."""
        seeds: dict[str, Rows] = {}
        for name in sorted({t.domain for t in self.tasks if t.domain in domain_names()}):
            domain = load_domain(name)
            try:
                seeds[name] = read_seed(self.root, self.layout, domain.module, domain)
            except DatasetError as exc:
                self.problems.extend(exc.problems)
                continue
            self.seeds[domain.module] = seeds[name]
        usable: list[Task] = []
        for task in self.tasks:
            if task.domain not in domain_names():  # on the checkout's own servers: no seed rows
                usable.append(task)
                continue
            seed = seeds.get(task.domain)
            if seed is None:
                continue
            try:
                validated_patch(
                    load_domain(task.domain).tables,
                    effective_init(task, self.scenarios[task.scenario]).data_patch,
                )
            except DataPatchError as exc:
                self.problems.append(
                    Problem(
                        path=task.source,
                        task=task.uid,
                        field=f"init.{_server_label(task, self.scenarios[task.scenario])}.data_patch",
                        message=str(exc),
                    )
                )
                continue
            usable.append(task)
        self.tasks = usable

    def release_support(self) -> dict[str, ReleaseSupport]:
        out: dict[str, ReleaseSupport] = {}
        for release, ids in self.releases.items():
            runnable = 0
            unsupported: Counter[str] = Counter()
            for task_id in ids:
                task = self.test_cases.get(task_id)
                if task is None or task.scenario not in self.scenarios:
                    continue
                if task.domain in domain_names() or self.checkout_domain(task) is not None:
                    runnable += 1
                else:
                    unsupported[_server_label(task, self.scenarios[task.scenario])] += 1
            if release == self.release:  # checked in full: seeds and data patches too
                runnable = len(self.tasks)
            out[release] = ReleaseSupport(
                tasks=len(ids), runnable=runnable, unsupported_servers=dict(sorted(unsupported.items()))
            )
        return out

    def task_servers(self, task: Task) -> list[str]:
        scen = self.scenarios[task.scenario]
        return [*scen.servers, *(s for s in task.init if s not in scen.world_state)]

    def checkout_domain(self, task: Task) -> str | None:
        """A task without a tbx domain whose servers the checkout declares runnable: its
        domain is their names (server_config order), else None."""
        if task.domain in domain_names() or task.scenario not in self.scenarios:
            return None
        servers = self.task_servers(task)
        if not servers or any(s not in self.servers_yaml.servers or _known_domain(s) for s in servers):
            return None
        return ",".join(servers)

    def check_task(self, task: Task) -> Task | None:
        """The task as tbx runs it (a checkout-server task gets its servers as domain), or
        None with its problems recorded."""
        checkout = self.checkout_domain(task)
        if checkout is not None:
            task = task.model_copy(update={"domain": checkout})
        return task if self._check_task(task) else None

    def _check_task(self, task: Task) -> bool:
        def add(field: str | None, message: str, severity: Severity = "error") -> None:
            self.problems.append(
                Problem(path=task.source, task=task.uid, field=field, message=message, severity=severity)
            )

        scen = self.scenarios.get(task.scenario)
        if scen is None:
            add("scenario", f"unknown scenario {task.scenario!r} (no dataset/scenario/{task.scenario}.yaml)")
            return False
        ok = True
        for server in task.init:
            if server not in scen.world_state:
                add(
                    f"init.{server}",
                    f"server not in scenario {scen.name!r} world_state (servers: {', '.join(scen.servers) or 'none'})",
                )
                ok = False
        if not ok:
            return False
        if task.domain not in domain_names() and not all(
            s in self.servers_yaml.servers for s in self.task_servers(task)
        ):
            refused = [s for s in self.task_servers(task) if s in self.servers_yaml.refused]
            for server in refused:
                self.refused[(server, self.servers_yaml.refused[server])] += 1
            if not refused:
                self.unsupported[_server_label(task, scen)] += 1  # one problem per server: report_unsupported
            return False
        try:
            inits = effective_inits(task, scen)
        except DatasetError as exc:
            self.problems.extend(exc.problems)
            return False
        allowed = set(scen.tool_names)
        for server, cfg in inits.items():
            for i, call in enumerate(cfg.golden_tool_interactions):
                if call.tool not in allowed:
                    add(
                        f"init.{server}.golden_test_case.tool_interactions[{i}].tool",
                        f"tool {call.tool!r} is not in scenario {scen.name!r}'s tools list",
                    )
                    ok = False
        if CHECK_CUSTOM in task.checks and task.test_code is None:
            add("checks", f"{CHECK_CUSTOM} is listed but the task has no test_code to run", "warning")
        return ok

    def warn_unused_scenarios(self, selected: set[str]) -> None:
        missing: dict[tuple[str, str], int] = defaultdict(int)
        for task in self.test_cases.values():
            if task.id not in selected and task.scenario not in self.scenarios:
                missing[(task.source, task.scenario)] += 1
        for (source, scen), n in missing.items():
            self.problems.append(
                Problem(
                    path=source,
                    message=f"{n} test case{'s use' if n != 1 else ' uses'} scenario {scen!r}, which has no "
                    f"dataset/scenario/{scen}.yaml; not in the release list, so ignored",
                    severity="warning",
                )
            )

    def benchmark(self) -> Benchmark:
        bench = Benchmark(
            root=self.root,
            layout=self.layout,
            scenarios=self.scenarios,
            agents=self.agents,
            release=self.release,
            release_ids=self.releases.get(self.release, []) if self.release else [],
            releases=self.releases,
            tasks=self.tasks,
            test_cases=self.test_cases,
            test_case_count=self.count,
            problems=self.problems,
            release_support=self.release_support(),
            checkout_servers=self.servers_yaml.servers,
        )
        bench._seeds.update(self.seeds)
        return bench


def _load(root: Path | str, release: str | Path | None) -> Benchmark:
    loaded = _Loaded(Path(root).expanduser().absolute())
    if not (loaded.root / "dataset").is_dir():
        loaded.problems.append(
            Problem(
                path=str(loaded.root),
                message="not a benchmark directory: no dataset/ folder "
                "(expected dataset/scenario, dataset/test_case, releases/)",
            )
        )
        return loaded.benchmark()
    loaded.load_scenarios()
    loaded.servers_yaml, problems = read_servers_yaml(loaded.root)
    loaded.problems.extend(problems)
    loaded.load_agents()
    loaded.load_test_cases()
    loaded.load_releases(release)
    loaded.select_tasks()
    loaded.load_seeds()
    return loaded.benchmark()


def validate_benchmark(root: Path | str, *, release: str | Path | None = None) -> list[Problem]:
    """Every problem (errors and warnings) of a benchmark directory; never raises for bad data."""
    return list(_load(root, release).problems)


def load_benchmark(
    root: Path | str | None = None, *, release: str | Path | None = None, strict: bool = True
) -> Benchmark:
    """Load a benchmark directory (default: :func:`default_root`).

    ``release``: a release list's path (relative to ``root`` or absolute), file
    name or stem; default: the only ``releases/**/testlist*.yaml``, or
    ``testlist_thinkingbox_bench_v1.yaml`` when there are several.
    ``strict=True`` raises :class:`DatasetError` (carrying all problems) if any
    error was found; ``strict=False`` returns the good tasks with
    ``Benchmark.problems`` listing the rest (warnings never raise).
    """
    bench = _load(default_root() if root is None else root, release)
    if strict and bench.errors:
        raise DatasetError(bench.problems, f"{bench.root}: {len(bench.errors)} problem(s); {bench.summary()}")
    return bench
