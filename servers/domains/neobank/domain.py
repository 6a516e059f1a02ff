"""The neobank IT help-desk server (`sandbox_neobank_support_v1`): the policy
search first, then the neobank Zendesk variant, then the help-desk tools in
the reference's listing order."""

from __future__ import annotations

from servers.domains.neobank import (
    approvals,
    approvers,
    assets,
    incidents,
    licenses,
    notifications,
    okta,
    procurement,
    workday,
)
from servers.domains.neobank.tables import TABLES
from servers.engine.policy_tool import policy_search_tool
from servers.engine.tools import Domain, collect
from servers.toolsets.zendesk import zendesk_tools

POLICY_TOOL = "knowledge_base_search_policy"

MAIN_TOOLS = collect(
    approvals.TOOLS,
    approvers.TOOLS,
    assets.TOOLS,
    notifications.TOOLS,
    procurement.TOOLS,
    licenses.TOOLS,
    okta.TOOLS,
    incidents.TOOLS,
    workday.TOOLS,
)

DOMAIN = Domain(
    name="neobank",
    server="sandbox_neobank_support_v1",
    tables=TABLES,
    tools=collect((policy_search_tool(POLICY_TOOL),), zendesk_tools("neobank"), MAIN_TOOLS),
    policy_tool=POLICY_TOOL,
    seed_folders=(
        ("zendesk", "sandbox_neobank_support/zendesk"),
        ("sandbox_neobank_support_main_models", "sandbox_neobank_support/main"),
    ),
)
DOMAIN.check()
