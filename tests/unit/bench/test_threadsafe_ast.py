"""`ast.parse` from many threads at once (what traceback formatting and the task-file
loader do in tbx's worker threads) never fails with CPython's recursion-depth SystemError."""

from __future__ import annotations

import ast
import traceback
from concurrent.futures import ThreadPoolExecutor

import bench  # noqa: F401  (installs the lock)

SOURCE = (
    "x = "
    + "(" * 60
    + "1"
    + ")" * 60
    + "\n"
    + "def f(a, b):\n    return [a[i] + b[i] for i in range(len(a))]\n" * 50
)


def _work(n: int) -> int:
    for _ in range(20):
        ast.parse(SOURCE)
        try:
            {}["missing"][n]  # type: ignore[index]
        except KeyError as exc:
            traceback.format_exception(exc)  # 3.11 parses the source line for its carets
    return n


def test_parses_in_threads_are_serialised_and_all_succeed() -> None:
    assert getattr(ast.parse, "_tbx_locked", False)
    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(_work, range(32))) == list(range(32))
    assert isinstance(ast.parse("1 + 1"), ast.Module)
