"""E-mail notifications to employees."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from servers.domains.neobank.common import EMAIL_NOTIFICATIONS, SYSTEM_ACTOR, require_employee
from servers.engine.helpers import count_id
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

REACHABLE_STATUSES = ("active", "on_leave")


class NotificationType(StrEnum):
    access_provisioned = "access_provisioned"
    access_revoked = "access_revoked"
    incident_access_granted = "incident_access_granted"
    post_facto_manager_alert = "post_facto_manager_alert"
    breaking_glass_alert = "breaking_glass_alert"
    hardware_assigned = "hardware_assigned"
    hardware_ordered = "hardware_ordered"
    ticket_update = "ticket_update"
    escalation_notice = "escalation_notice"


class EmailPriority(StrEnum):
    low = "low"
    normal = "normal"
    high = "high"
    urgent = "urgent"


class EmailNotificationSendNotificationInput(ToolInput):
    recipient_email: str = Field(description="Corporate email of the employee to notify.")
    notification_type: NotificationType = Field(description="Kind of notification.")
    subject: str = Field(description="Subject line.")
    body: str = Field(description="Message text.")
    ticket_id: str | None = Field(default=None, description="Help-desk ticket the message is about.")
    priority: EmailPriority | None = Field(default=None, description="Delivery priority (normal if omitted).")
    cc_emails: str | None = Field(
        default=None, description="Extra recipients, as one comma-separated string."
    )


def split_cc(text: str | None) -> list[str] | None:
    """Comma-separated addresses, each trimmed, order and empty pieces kept."""
    if not text:
        return None
    return [part.strip() for part in text.split(",")]


@tool(
    "email_notification_api_send_notification",
    EmailNotificationSendNotificationInput,
    "Queue an e-mail notification to an employee (not sent to departing or terminated employees).",
)
def send_notification(ctx: ToolContext, args: EmailNotificationSendNotificationInput) -> dict[str, Any]:
    recipient = require_employee(ctx, args.recipient_email, "Recipient email not found in employee directory")
    if recipient["employment_status"] not in REACHABLE_STATUSES:
        raise ToolError(
            f"Recipient is inactive or on extended leave; notification not sent: {args.recipient_email}"
        )
    notification_id = count_id(ctx.db, EMAIL_NOTIFICATIONS, "NTF-%08d")
    ctx.db.insert(
        EMAIL_NOTIFICATIONS,
        {
            "id": notification_id,
            "recipient_id": recipient["id"],
            "recipient_email": args.recipient_email,
            "notification_type": args.notification_type.value,
            "subject": args.subject,
            "body": args.body,
            "ticket_id": args.ticket_id,
            "priority": (args.priority or EmailPriority.normal).value,
            "cc_emails": split_cc(args.cc_emails),
            "sent_at": None,
            "delivery_status": "queued",
            "delivered_at": None,
            "sent_by": SYSTEM_ACTOR,
        },
    )
    return {"notification_id": notification_id, "delivery_status": "queued"}


TOOLS = (send_notification,)
