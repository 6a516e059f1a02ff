"""Public names of a package that load on first use (PEP 562), shared by
`sandbox` and `judge`.

It lives outside the four parts because the import rules
(tests/unit/test_import_rules.py) let neither of those two import the other,
nor `bench`; it imports nothing of tbx itself, so any part may use it.

    # in a package's __init__.py
    _EXPORTS = {"ProxyServer": "sandbox.proxy.server", ...}  # name -> defining module
    __all__ = sorted(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

`import sandbox` then stays cheap (`tbx --help` loads neither Docker nor MCP):
a name's module is imported when the name is first looked up, and the value
is kept in the package's namespace so later lookups are plain attribute reads.
For the type checker the package also imports the same names under
`TYPE_CHECKING`; a unit test holds that block equal to `_EXPORTS`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` for `package`, whose public
    names are `exports` (name -> the module that defines it)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
