"""The retail server (`sandbox_external_retail`): the generic Zendesk toolset,
then the retail subsystems in the reference's listing order, then policy search."""

from __future__ import annotations

from servers.domains.retail import (
    extend,
    jobber,
    loop_returns,
    netsuite,
    oms,
    promo,
    salesforce,
    shopify_pim,
    stripe,
)
from servers.domains.retail.tables import TABLES
from servers.engine.policy_tool import policy_search_tool
from servers.engine.tools import Domain, collect
from servers.toolsets.zendesk import zendesk_tools

TOOLS = collect(
    zendesk_tools("generic"),
    oms.TOOLS,
    stripe.TOOLS,
    extend.TOOLS,
    jobber.TOOLS,
    loop_returns.TOOLS,
    netsuite.TOOLS,
    promo.TOOLS,
    salesforce.TOOLS,
    shopify_pim.TOOLS,
    (policy_search_tool("search_policy"),),
)

DOMAIN = Domain(
    name="retail",
    server="sandbox_external_retail",
    tables=TABLES,
    tools=TOOLS,
    policy_tool="search_policy",
    # Retail uses the shared Zendesk data; its own tables are named after their model modules.
    seed_folders=(
        ("zendesk", "zendesk"),
        *(
            (f"external_retail_toolset_{sub}_models", f"external_retail_toolset/{sub}")
            for sub in (
                "oms",
                "stripe",
                "extend",
                "jobber",
                "loop_returns",
                "netsuite",
                "promo",
                "salesforce",
                "shopify_pim",
            )
        ),
    ),
)
DOMAIN.check()
