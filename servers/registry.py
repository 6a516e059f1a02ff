"""Where each domain's server definition lives (imported lazily: a server
container loads only its own domain)."""

from __future__ import annotations

import importlib

from servers.engine.tools import Domain

DOMAIN_MODULES = {
    "retail": "servers.retail.domain",
    "auto_insurance": "servers.auto_insurance.domain",
    "consulting": "servers.consulting.domain",
    "travel": "servers.travel.domain",
    "neobank": "servers.neobank.domain",
}

# The benchmark's server names (scenario keys, trace `server`) and tbx's names.
SERVER_TO_DOMAIN = {
    "sandbox_external_retail": "retail",
    "sandbox_auto_insurance": "auto_insurance",
    "sandbox_consulting": "consulting",
    "external_booking_v1": "travel",
    "sandbox_neobank_support_v1": "neobank",
}


class UnknownDomainError(KeyError):
    pass


def load_domain(name: str) -> Domain:
    name = SERVER_TO_DOMAIN.get(name, name)
    if name not in DOMAIN_MODULES:
        raise UnknownDomainError(f"unknown domain {name!r}; known: {', '.join(DOMAIN_MODULES)}")
    try:
        module = importlib.import_module(DOMAIN_MODULES[name])
    except ModuleNotFoundError as exc:
        raise UnknownDomainError(f"domain {name!r} is not implemented yet ({exc.name})") from exc
    domain: Domain = module.DOMAIN
    return domain


def available_domains() -> list[str]:
    out = []
    for name, mod in DOMAIN_MODULES.items():
        try:
            importlib.import_module(mod)
            out.append(name)
        except ModuleNotFoundError:
            continue
    return out
