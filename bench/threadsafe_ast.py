"""One lock around `ast.parse` for the whole process (a CPython 3.11/3.12 bug).

CPython keeps the AST constructor's recursion-depth counter per interpreter, not
per thread (gh-106905 and its follow-ups): two threads building AST objects at
once can fail with `SystemError: AST constructor recursion depth mismatch`.
tbx builds ASTs in worker threads without asking for it: the dataset loader
parses `.py` task files, and Python 3.11's `traceback` parses source lines
(`ast.parse`) for its error carets whenever a traceback is formatted, which
the coordinator, the reaper and logging do in threads. Seen in CI as a
conformance replay that failed with that SystemError. Serialising the module
function covers every caller that goes through it (the traceback module does).
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Any

__all__ = ["install"]

_LOCK = threading.RLock()


def install() -> None:
    """Wrap `ast.parse` once (idempotent; nothing to do on 3.13+, where the counter is per thread)."""
    if sys.version_info >= (3, 13) or getattr(ast.parse, "_tbx_locked", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def locked_parse(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return parse(*args, **kwargs)

    locked_parse._tbx_locked = True  # type: ignore[attr-defined]
    ast.parse = locked_parse
