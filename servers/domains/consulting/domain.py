"""The consulting IT/HR server (`sandbox_consulting`): 18 toolsets in the
reference's listing order."""

from __future__ import annotations

from servers.domains.consulting import (
    approval,
    approver_lookup,
    asset_management,
    background_check,
    box,
    client_access,
    concur,
    degreed,
    hardware_procurement,
    license_management,
    mavenlink,
    nda,
    okta,
    salesforce_crm,
    software_catalog,
    tables,
    workday,
)
from servers.engine.policy_tool import policy_search_tool
from servers.engine.schema import TableSpec
from servers.engine.tools import Domain, collect
from servers.toolsets.zendesk import zendesk_tools

POLICY_TOOL = "knowledge_base_search_policy"


def _user_org_as_text(spec: TableSpec) -> TableSpec:
    """The consulting Zendesk user stores any non-null `organization_id` as
    text (in data_patch rows as in tool writes); the export's field metadata
    cannot express that, so it is set here rather than in generated tables.py."""
    if spec.name != "zendesk_users":
        return spec
    fields = tuple(
        fs.model_copy(update={"to_text": True}) if fs.name == "organization_id" else fs for fs in spec.fields
    )
    return spec.model_copy(update={"fields": fields})


TABLES = tuple(_user_org_as_text(t) for t in tables.TABLES)

DOMAIN = Domain(
    name="consulting",
    server="sandbox_consulting",
    tables=TABLES,
    tools=collect(
        zendesk_tools("consulting"),
        software_catalog.TOOLS,
        salesforce_crm.TOOLS,
        workday.TOOLS,
        okta.TOOLS,
        mavenlink.TOOLS,
        concur.TOOLS,
        asset_management.TOOLS,
        license_management.TOOLS,
        degreed.TOOLS,
        client_access.TOOLS,
        approval.TOOLS,
        background_check.TOOLS,
        nda.TOOLS,
        box.TOOLS,
        approver_lookup.TOOLS,
        hardware_procurement.TOOLS,
        (policy_search_tool(POLICY_TOOL),),
    ),
    policy_tool=POLICY_TOOL,
    # Toolsets without tables (background_check, nda, approver_lookup, hardware_procurement,
    # the knowledge base) ship empty initial_data folders and need no entry.
    seed_folders=tuple(
        (sub, f"sandbox_consulting/{sub}")
        for sub in (
            "zendesk",
            "software_catalog",
            "salesforce_crm",
            "workday",
            "okta",
            "mavenlink",
            "concur",
            "asset_management",
            "license_management",
            "degreed",
            "client_access",
            "approval",
            "box",
        )
    ),
)
DOMAIN.check()
