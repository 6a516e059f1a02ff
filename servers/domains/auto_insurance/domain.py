"""The auto-insurance server (`sandbox_auto_insurance`): Zendesk (domain
variant), policy, billing, claims, CRM, lookup and the policy search, listed
in the reference's order."""

from __future__ import annotations

from servers.domains.auto_insurance import billing, claims, crm, lookup, policy
from servers.domains.auto_insurance.tables import TABLES
from servers.engine.policy_tool import policy_search_tool
from servers.engine.tools import Domain, collect
from servers.toolsets.zendesk import zendesk_tools

DOMAIN = Domain(
    name="auto_insurance",
    server="sandbox_auto_insurance",
    tables=TABLES,
    tools=collect(
        zendesk_tools("auto_insurance"),
        policy.TOOLS,
        billing.TOOLS,
        claims.TOOLS,
        crm.TOOLS,
        lookup.TOOLS,
        (policy_search_tool("knowledge_base_search_policy"),),
    ),
    policy_tool="knowledge_base_search_policy",
    seed_folders=tuple(
        (sub, f"sandbox_auto_insurance/{sub}") for sub in ("zendesk", "policy", "billing", "claims", "crm")
    ),
)
DOMAIN.check()
