"""The travel / hotel-booking server (`external_booking_v1`)."""

from __future__ import annotations

from servers.domains.travel import booking_api, corporate_api, crm_api, hotel_partner_api, lookup, payment_api
from servers.domains.travel.tables import TABLES
from servers.engine.policy_tool import policy_search_tool
from servers.engine.tools import Domain, collect
from servers.toolsets.zendesk import zendesk_tools

POLICY_TOOL = "knowledge_base_search_policy"

DOMAIN = Domain(
    name="travel",
    server="external_booking_v1",
    tables=TABLES,
    # Listing order of the reference: zendesk, booking, corporate, CRM, hotel
    # partner, payment, knowledge base, lookup.
    tools=collect(
        zendesk_tools("travel"),
        booking_api.TOOLS,
        corporate_api.TOOLS,
        crm_api.TOOLS,
        hotel_partner_api.TOOLS,
        payment_api.TOOLS,
        (policy_search_tool(POLICY_TOOL),),
        lookup.TOOLS,
    ),
    policy_tool=POLICY_TOOL,
    seed_folders=tuple(
        (sub, f"external_booking/{sub}")
        for sub in (
            "zendesk",
            "booking_api",
            "corporate_api",
            "crm_api",
            "hotel_partner_api",
            "payment_api",
            "lookup",
        )
    ),
)
DOMAIN.check()
