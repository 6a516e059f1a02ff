"""Read test cases out of a ``thinkingbox-data`` ``.py`` task file - statically.

The file is parsed with :mod:`ast`; nothing is imported or executed. Same rules
as the harness parser (``thinkingbox.common.python_test_file``):

* a module-level string statement starting with ``!`` is YAML whose keys are
  defaults for every test function defined *after* it (shallow merge, the
  test's keys win, except ``tags`` lists which are concatenated);
* a top-level ``def`` whose first statement is a string starting with ``!``
  is a test case named after the function; the string (minus ``!``,
  dedented) is its YAML config.

``checks`` is inferred from the body (unless the YAML sets it): each statement
that is a bare call of ``validate_database(...)`` / ``validate_rubrics_yesno(...)``
adds that check; any other statement adds ``custom_python``, which means the
function itself is run (in the evaluator sandbox, bench/evaluator). Each test keeps
its code string (``test_code``, the reference's rule): the file with every test
function's lines blanked but this one's, line numbers kept, and
``__tb_test_fn = <name>`` appended.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import yaml

from .errors import Problem
from .models import CHECK_CUSTOM, CHECK_DATABASE, CHECK_RUBRICS
from .parse import Collector, type_name
from .yamlio import parse_yaml, yaml_error_message

_CALL_CHECKS = (CHECK_DATABASE, CHECK_RUBRICS)


def _bang_string(node: ast.stmt) -> str | None:
    """The text of a ``!``-string statement (YAML docstring), without the ``!``; else None."""
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and node.value.value.startswith("!")
    ):
        return textwrap.dedent(node.value.value[1:])
    return None


def infer_checks(fn: ast.FunctionDef) -> list[str]:
    checks: list[str] = []
    custom = False
    for stmt in fn.body[1:]:
        if isinstance(stmt, ast.Pass):
            continue
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id in _CALL_CHECKS
        ):
            if stmt.value.func.id not in checks:
                checks.append(stmt.value.func.id)
            continue
        custom = True
    if custom:
        checks.append(CHECK_CUSTOM)
    return checks


def code_string(lines: list[str], test_spans: list[tuple[int, int]], fn: ast.FunctionDef) -> str:
    """The code run for the test `fn`: `lines` (the file split on newlines) with every
    test function's lines (`test_spans`, 1-based, inclusive) blanked, then `fn`'s put
    back, then the line binding `__tb_test_fn` and a final empty line."""
    kept = list(lines)
    for start, end in test_spans:
        kept[start - 1 : end] = [""] * (end - start + 1)
    start, end = fn.lineno, fn.end_lineno or fn.lineno
    kept[start - 1 : end] = lines[start - 1 : end]
    return "\n".join([*kept, f"__tb_test_fn = {fn.name}", ""])


def _yaml_mapping(text: str, c: Collector, where: str, first_line: int) -> dict[str, Any] | None:
    try:
        obj = parse_yaml(text)
    except yaml.YAMLError as exc:
        # the YAML starts on the docstring's first line (right after the quotes and '!')
        c.add(where, yaml_error_message(exc, line_offset=first_line - 1))
        return None
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        c.add(where, f"docstring YAML must be a mapping, got {type_name(obj)}")
        return None
    return obj


def parse_py_test_file(text: str, path: str) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Raw test-case mappings (``uid`` first, then the config keys) of a ``.py`` task file."""
    c = Collector(path)
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        c.add(None, f"not valid Python (line {exc.lineno}): {exc.msg}")
        return [], c.problems

    lines = text.split("\n")
    tests = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.body and _bang_string(node.body[0]) is not None
    ]
    spans = [(fn.lineno, fn.end_lineno or fn.lineno) for fn in tests]
    defaults: dict[str, Any] = {}
    cases: list[dict[str, Any]] = []
    for node in tree.body:
        module_yaml = _bang_string(node)
        if module_yaml is not None:
            obj = _yaml_mapping(module_yaml, c, "module docstring", node.lineno)
            if obj is not None:
                defaults.update(obj)
            continue
        if not isinstance(node, ast.FunctionDef) or not node.body:
            continue
        fn_yaml = _bang_string(node.body[0])
        if fn_yaml is None:
            continue
        fc = Collector(path, node.name)
        obj = _yaml_mapping(fn_yaml, fc, "docstring", node.body[0].lineno)
        c.problems.extend(fc.problems)
        if obj is None:
            # keep a placeholder so the loader knows this test exists but is broken
            cases.append({"uid": node.name, "__broken__": True})
            continue
        merged = {**defaults, **obj}
        if isinstance(defaults.get("tags"), list) and isinstance(obj.get("tags"), list):
            merged["tags"] = defaults["tags"] + obj["tags"]
        merged.pop("uid", None)
        case: dict[str, Any] = {"uid": node.name, **merged}
        if "checks" not in case:
            case["checks"] = infer_checks(node)
        case["test_code"] = code_string(lines, spans, node)
        cases.append(case)
    return cases, c.problems
