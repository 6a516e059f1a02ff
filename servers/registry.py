"""Where each domain's server definition lives: every package `servers.domains.<name>`
with a `domain` module is a domain, and its `Domain` object is the one source
of its names (short name, benchmark server name, export module).

A domain is imported only when asked for by its short name (a server
container loads only its own). A domain whose module fails to import fails
the caller loudly: it never silently drops out of a run or a test.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil

from servers.engine.tools import Domain


class UnknownDomainError(KeyError):
    pass


@functools.cache
def domain_names() -> tuple[str, ...]:
    """The short names of every domain package, in a stable (sorted) order."""
    from servers import domains

    def has_domain_module(pkg: pkgutil.ModuleInfo) -> bool:
        where = os.path.join(str(getattr(pkg.module_finder, "path", "")), pkg.name)
        return any(m.name == "domain" for m in pkgutil.iter_modules([where]))

    return tuple(
        sorted(m.name for m in pkgutil.iter_modules(domains.__path__) if m.ispkg and has_domain_module(m))
    )


def _import(name: str) -> Domain:
    domain: Domain = importlib.import_module(f"servers.domains.{name}.domain").DOMAIN
    if domain.name != name:
        raise RuntimeError(f"servers.domains.{name}.domain declares the domain {domain.name!r}")
    return domain


@functools.cache
def server_to_domain() -> dict[str, str]:
    """The benchmark's server names (scenario keys, trace `server`) -> tbx's short
    names, read off the `Domain` objects (imports every domain)."""
    return {d.server: d.name for d in map(_import, domain_names())}


def load_domain(name: str) -> Domain:
    """A domain by its short name or its benchmark server name."""
    if name not in domain_names():
        name = server_to_domain().get(name, name)
    if name not in domain_names():
        raise UnknownDomainError(f"unknown domain {name!r}; known: {', '.join(domain_names())}")
    return _import(name)
