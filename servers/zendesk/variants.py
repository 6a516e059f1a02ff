"""Per-domain differences of the Zendesk toolset, as one small config object
per variant (the tools themselves are shared, see `servers.zendesk.tools`)."""

from __future__ import annotations

from dataclasses import dataclass

# A custom ticket field of a variant: (name, kind) where kind is "str",
# "float" or a tuple (enum class name, allowed values).
EnumKind = tuple[str, tuple[str, ...]]
FieldDef = tuple[str, "str | EnumKind"]

# Tags the travel desk never stores on a ticket (compared case-insensitively).
TRAVEL_IGNORED_TAGS = frozenset({"vip-customer", "repeat-issue", "hotel-partner-escalation"})


@dataclass(frozen=True)
class Variant:
    name: str
    # Custom ticket fields appended after `due_at`, in model order.
    ticket_fields: tuple[FieldDef, ...] = ()
    # Ticket `tags` / organization `domain_names` arrive as comma-separated text.
    csv_lists: bool = False
    # Update: an explicit null for a list field empties the list (else nulls are skipped).
    null_clears_lists: bool = False
    # Create: a ticket whose status is not `open` is logged in the violations table.
    status_violations: bool = False
    # Travel: ignored tags dropped + case-insensitive tag sort, refund default,
    # replies echo the caller's tags.
    travel_tags: bool = False
    # `ne`, `ge`, `le` are understood by $filter (the generic copy only knows eq/gt/lt).
    full_comparisons: bool = True


_YES_NO: EnumKind = ("ApprovalRequired", ("yes", "no"))

GENERIC = Variant(name="generic", null_clears_lists=True, full_comparisons=False)

AUTO_INSURANCE = Variant(
    name="auto_insurance",
    ticket_fields=(
        ("request_category", "str"),
        ("claims_action_type", "str"),
        ("effective_date_of_change", "str"),
        ("internal_review_type", "str"),
        ("outcome_summary", "str"),
        ("escalation_level", "str"),
        ("user_type", "str"),
    ),
    status_violations=True,
)

CONSULTING = Variant(
    name="consulting",
    ticket_fields=(
        ("engagement_code", "str"),
        ("approval_required", _YES_NO),
        ("approver_id", "str"),
        ("asset_id", "str"),
        ("catalog_id", "str"),
        ("client_id", "str"),
        ("expense_report_id", "str"),
        ("course_id", "str"),
        ("folder_id", "str"),
        (
            "device_type",
            ("DeviceType", ("laptop", "phone", "monitor", "docking_station", "headset", "peripheral")),
        ),
        ("hardware_order_id", "str"),
        ("access_type", ("AccessType", ("full_access", "read_only", "contributor", "admin"))),
        ("license_pool", ("LicensePool", ("standard", "enterprise"))),
    ),
    status_violations=True,
)

NEOBANK = Variant(
    name="neobank",
    ticket_fields=(
        (
            "resolution_category",
            (
                "ResolutionCategory",
                (
                    "provisioned",
                    "approved",
                    "denied",
                    "information_provided",
                    "escalated_it_ops",
                    "escalated_it_inf",
                    "escalated_it_sec",
                    "escalated_ops",
                    "escalated_compl",
                    "escalated_engin",
                    "backlogged",
                    "duplicate",
                    "cancelled",
                    "resolved_by_requester",
                ),
            ),
        ),
        (
            "owner",
            (
                "Owner",
                (
                    "it_support",
                    "it_ops_team",
                    "it_inf_team",
                    "it_sec_team",
                    "ops_team",
                    "comp_team",
                    "engin_team",
                ),
            ),
        ),
        ("access_expiry_date", "str"),
        ("approval_required", _YES_NO),
        (
            "approval_status",
            ("ApprovalStatus", ("not_required", "pending", "approved", "rejected", "escalated")),
        ),
        ("approver_id", "str"),
        ("approval_request_ids", "str"),
        ("business_justification", "str"),
        (
            "incident_severity",
            ("IncidentSeverity", ("sev1_critical", "sev2_high", "sev3_medium", "sev4_low")),
        ),
        ("customer_impact", ("CustomerImpact", ("yes_active", "yes_potential", "no_impact"))),
        ("asset_id", "str"),
    ),
    csv_lists=True,
    status_violations=True,
)

TRAVEL = Variant(
    name="travel",
    ticket_fields=(
        ("booking_reference", "str"),
        ("hotel_id", "str"),
        ("check_in_date", "str"),
        ("booking_value", "float"),
        (
            "request_type_detail",
            (
                "RequestTypeDetail",
                (
                    "modify-dates",
                    "modify-guests",
                    "modify-room-type",
                    "modify-board-type",
                    "cancel-booking",
                    "request-refund",
                    "add-special-request",
                    "billing-inquiry",
                    "post-stay-issue",
                    "other",
                ),
            ),
        ),
        ("corporate_account_id", "str"),
        ("group_booking_id", "str"),
        (
            "resolution_action",
            (
                "ResolutionAction",
                (
                    "refund-full",
                    "refund-partial",
                    "modification-completed",
                    "escalated-hotel",
                    "policy-applied-no-action",
                    "information-provided",
                    "voucher-issued",
                ),
            ),
        ),
        ("refund_amount", "float"),
        (
            "escalation_reason",
            (
                "EscalationReason",
                (
                    "same-day-modification",
                    "hotel-confirmation-required",
                    "large-group-booking",
                    "system-error",
                    "high-value-dispute",
                    "guest-complaint",
                ),
            ),
        ),
    ),
    travel_tags=True,
)

VARIANT_CONFIGS: dict[str, Variant] = {
    v.name: v for v in (GENERIC, AUTO_INSURANCE, CONSULTING, NEOBANK, TRAVEL)
}
