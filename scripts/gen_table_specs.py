"""Generate table declarations from the field metadata of a benchmark export
(`servers/<module>/tables.json`).

Only structural facts are carried over (names, types, keys, defaults, enums,
constraints, unstable flags); descriptions are not.

    python scripts/gen_table_specs.py EXPORT zendesk   # servers/toolsets/zendesk/tables.py
    python scripts/gen_table_specs.py EXPORT retail    # servers/domains/retail/tables.py
    ruff format servers/

The `zendesk_*` tables are the same in every domain but for the custom ticket
fields after `due_at`: they are written once, to `servers/toolsets/zendesk/tables.py`
(checked identical across the export's servers), with each Zendesk variant's
custom ticket fields; a domain's `tables.py` starts with `zendesk_tables(variant)`
and holds only its own tables. Run the zendesk step first.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from servers.registry import domain_names, load_domain  # noqa: E402
from servers.toolsets.zendesk import VARIANTS  # noqa: E402
from servers.toolsets.zendesk.variants import VARIANT_CONFIGS  # noqa: E402

TICKETS = "zendesk_tickets"
VIOLATIONS = "zendesk_ticket_status_violations"
LAST_SHARED_TICKET_FIELD = "due_at"
# A domain's Zendesk variant: the one of the same name, else the generic copy.
GENERIC_VARIANT = "generic"
SCALARS = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "Decimal": "decimal",
    "date": "date",
    "datetime": "datetime",
    "datetime.datetime": "datetime",
    "List[str]": "list_str",
    "list[str]": "list_str",
}


def _field(fd: dict) -> str:
    t = fd["type"]
    nullable = False
    m = re.fullmatch(r"Optional\[(.+)\]", t)
    if m:
        nullable, t = True, m.group(1)
    args = [repr(fd["name"])]
    if t in SCALARS:
        kind = SCALARS[t]
        args.append(repr(kind))
    else:
        enums = fd.get("enums") or {}
        if t not in enums:
            raise SystemExit(f"unknown type {fd['type']!r} for field {fd['name']}")
        kind = "enum"
        args.append("'enum'")
        args.append(f"enum=({t!r}, {tuple(enums[t])!r})")
    if nullable:
        args.append("nullable=True")
    if "default" in fd:
        args.append(f"default={fd['default']!r}")
    elif fd.get("default_factory") == "list":
        args.append("default_list=True")
    elif fd.get("default_factory") == "datetime.utcnow":
        args.append("default_now=True")
    elif not fd["required"]:
        raise SystemExit(f"{fd['name']}: optional without a default")
    schema = json.dumps(fd["json_schema"])
    mlen = re.search(r'"minLength": (\d+)', schema)
    if mlen:
        args.append(f"min_length={mlen.group(1)}")
    if fd["unstable"]:
        args.append("unstable=True")
    return f"        f({', '.join(args)}),"


def _table(name: str, spec: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> list[str]:
    pk = spec["primary_key"]
    key = tuple(pk["fields"])
    key_src = repr(key[0]) if len(key) == 1 else repr(key)
    opts = [f"extra={spec['extra_fields_policy']!r}"]
    if pk.get("composite_format"):
        opts.append(f"key_format={pk['composite_format']!r}")
    out = [f"    table(\n        {name!r},\n        {key_src},\n        ["]
    out.extend("    " + _field(fd) for fd in (spec["fields"] if fields is None else fields))
    out.append(f"        ],\n        {', '.join(opts)},\n    ),")
    return out


def _export_tables(export: Path, domain: str) -> dict[str, Any]:
    path = export / "servers" / load_domain(domain).module / "tables.json"
    tables: dict[str, Any] = json.loads(path.read_text())
    return tables


def variant_of(domain: str) -> str:
    return domain if domain in VARIANTS else GENERIC_VARIANT


def generate_zendesk(export: Path) -> str:
    """The shared Zendesk tables and every variant's custom ticket fields; fails
    unless the export's servers agree on everything else."""
    shared: dict[str, list[str]] = {}
    violations: list[str] | None = None
    ticket_fields: dict[str, list[str]] = {}
    for domain in domain_names():
        rendered: dict[str, list[str]] = {}
        tables = _export_tables(export, domain)
        if (VIOLATIONS in tables) != VARIANT_CONFIGS[variant_of(domain)].status_violations:
            raise SystemExit(f"{domain}: {VIOLATIONS} present in the export iff its variant logs violations")
        for name, spec in tables.items():
            if name == TICKETS:
                names = [fd["name"] for fd in spec["fields"]]
                cut = names.index(LAST_SHARED_TICKET_FIELD) + 1
                rendered[name] = _table(name, spec, spec["fields"][:cut])
                ticket_fields[variant_of(domain)] = ["    " + _field(fd) for fd in spec["fields"][cut:]]
            elif name == VIOLATIONS:
                text = _table(name, spec)
                if violations is not None and text != violations:
                    raise SystemExit(f"{domain}: {VIOLATIONS} differs from another domain's")
                violations = text
            elif name.startswith("zendesk_"):
                rendered[name] = _table(name, spec)
        if shared and (list(rendered) != list(shared) or rendered != shared):
            raise SystemExit(
                f"{domain}: the zendesk_* tables differ from another domain's (beyond ticket fields)"
            )
        shared = rendered
    if violations is None:
        raise SystemExit(f"no server has {VIOLATIONS}")
    out = [
        '"""The Zendesk tables every domain shares, in registration order, and each',
        "variant's custom ticket fields (appended to `zendesk_tickets` after `due_at`);",
        "generated by scripts/gen_table_specs.py from the benchmark export's field",
        'metadata. `servers.toolsets.zendesk.zendesk_tables(variant)` puts them together."""',
        "",
        "from servers.engine.schema import FieldSpec, TableSpec, f, table",
        "",
        "# Registered first, by the variants that log status violations.",
        "STATUS_VIOLATIONS: TableSpec = " + "\n".join(violations)[4:-1],
        "",
        "# `zendesk_tickets` with the shared fields only.",
        "TABLES: tuple[TableSpec, ...] = (",
    ]
    for lines in shared.values():
        out.extend(lines)
    out += [")", "", "TICKET_FIELDS: dict[str, tuple[FieldSpec, ...]] = {"]
    for variant in VARIANTS:
        out.append(f"    {variant!r}: (")
        out.extend(ticket_fields[variant])
        out.append("    ),")
    out.append("}")
    return "\n".join(out) + "\n"


def tables_file(what: str) -> Path:
    """Where the generated declarations of `what` (a domain or "zendesk") live."""
    if what == "zendesk":
        return REPO / "servers" / "toolsets" / "zendesk" / "tables.py"
    return REPO / "servers" / "domains" / what / "tables.py"


def generate(export: Path, domain: str) -> str:
    """A domain's own tables, after its Zendesk variant's."""
    out = [
        f'"""Tables of the {domain} server, in registration order (generated by',
        'scripts/gen_table_specs.py from the benchmark export\'s field metadata)."""',
        "",
        "from servers.engine.schema import TableSpec, f, table",
        "from servers.toolsets.zendesk import zendesk_tables",
        "",
        "TABLES: tuple[TableSpec, ...] = (",
        f"    *zendesk_tables({variant_of(domain)!r}),",
    ]
    names = list(_export_tables(export, domain))
    shared = [n for n in names if n.startswith("zendesk_")]
    if names[: len(shared)] != shared:
        raise SystemExit(f"{domain}: the zendesk_* tables are not registered first")
    for name, spec in _export_tables(export, domain).items():
        if not name.startswith("zendesk_"):
            out.extend(_table(name, spec))
    out.append(")")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    export, what = Path(sys.argv[1]), sys.argv[2]
    target = tables_file(what)
    target.write_text(generate_zendesk(export) if what == "zendesk" else generate(export, what))
    print(f"wrote {target}")
