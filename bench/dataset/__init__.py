"""ThinkingBox-Bench dataset loader.

Reads a benchmark directory - the shared data-only export (YAML test cases,
``servers/<module>/seed.json``) or a ``thinkingbox-data`` checkout (``.py``
task files parsed statically with ``ast``) - into immutable pydantic models.

    bench = load_benchmark(path)              # raises DatasetError on any error
    for task in bench.tasks:                  # release order, ids "<file>.py:<uid>"
        init = bench.effective_init(task)     # scenario world_state + task init
        init.data_patch, init.golden_tool_interactions, init.rubrics_yesno, init.sources

``validate_benchmark(path)`` lists every problem (``tbx tasks validate``:
``bench.cli.tasks``).
"""

from .domains import domain_of, server_module
from .errors import DatasetError, Problem, format_problems
from .loader import DATASET_ENV, DEFAULT_RELEASE, Benchmark, default_root, load_benchmark, validate_benchmark
from .merge import effective_init, effective_inits, merge_init_config, recursive_merge
from .models import (
    CHECK_CUSTOM,
    CHECK_DATABASE,
    CHECK_RUBRICS,
    AgentPrompt,
    PolicySource,
    Scenario,
    ScenarioTool,
    ServerInit,
    Task,
    ToolInteraction,
)
from .pyfile import parse_py_test_file
from .seeds import find_initial_data, load_initial_data, load_seed

__all__ = [
    "CHECK_CUSTOM",
    "CHECK_DATABASE",
    "CHECK_RUBRICS",
    "DATASET_ENV",
    "DEFAULT_RELEASE",
    "AgentPrompt",
    "Benchmark",
    "DatasetError",
    "PolicySource",
    "Problem",
    "Scenario",
    "ScenarioTool",
    "ServerInit",
    "Task",
    "ToolInteraction",
    "default_root",
    "domain_of",
    "effective_init",
    "effective_inits",
    "find_initial_data",
    "format_problems",
    "load_benchmark",
    "load_initial_data",
    "load_seed",
    "merge_init_config",
    "parse_py_test_file",
    "recursive_merge",
    "server_module",
    "validate_benchmark",
]
