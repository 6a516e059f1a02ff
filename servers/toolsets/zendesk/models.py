"""Request models of the Zendesk tools.

`item` payloads are validated against an ordered union of shapes (pydantic's
smart union): the shape is picked by the number of recognised keys, then by
exactness, then by declaration order, independently of the target table.
Shape class names appear in validation error locations, so they are fixed.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from servers.engine.rows import FINITE_NUMBERS
from servers.engine.schema import FieldSpec
from servers.engine.tools import ToolInput
from servers.toolsets.zendesk.variants import Variant


class TableName(str, enum.Enum):  # noqa: UP042  (plain str-valued enum, as pydantic sees the reference)
    ACTIVITIES = "activities"
    ARTICLES = "articles"
    GROUPS = "groups"
    GROUP_MEMBERSHIPS = "group_memberships"
    ORGANIZATIONS = "organizations"
    REQUESTS = "requests"
    SATISFACTION_RATINGS = "satisfaction_ratings"
    SESSIONS = "sessions"
    TAGS = "tags"
    TARGETS = "targets"
    TICKETS = "tickets"
    TICKET_AUDITS = "ticket_audits"
    TICKET_COMMENTS = "ticket_comments"
    TICKET_FIELDS = "ticket_fields"
    TICKET_METRICS = "ticket_metrics"
    TRIGGERS = "triggers"
    USERS = "users"
    VIEWS = "views"
    COMMENTS = "comments"


class TicketStatus(str, enum.Enum):  # noqa: UP042  (plain str-valued enum, as pydantic sees the reference)
    NEW = "new"
    OPEN = "open"
    PENDING = "pending"
    HOLD = "hold"
    SOLVED = "solved"
    CLOSED = "closed"


class TicketPriority(str, enum.Enum):  # noqa: UP042  (plain str-valued enum, as pydantic sees the reference)
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


class TicketType(str, enum.Enum):  # noqa: UP042  (plain str-valued enum, as pydantic sees the reference)
    PROBLEM = "problem"
    INCIDENT = "incident"
    QUESTION = "question"
    TASK = "task"


class UserRole(str, enum.Enum):  # noqa: UP042  (plain str-valued enum, as pydantic sees the reference)
    END_USER = "end-user"
    AGENT = "agent"
    ADMIN = "admin"


class ZendeskInput(ToolInput):
    """Zendesk tools ignore unknown top-level parameters."""

    model_config = ConfigDict(extra="ignore")


_SHAPE_CONFIG = FINITE_NUMBERS | ConfigDict(extra="ignore")


@functools.cache
def _custom_enum(name: str, values: tuple[str, ...]) -> type[enum.Enum]:
    return enum.Enum(name, {v.upper().replace("-", "_"): v for v in values}, type=str)  # type: ignore[return-value]


def _custom_type(fs: FieldSpec) -> Any:
    if fs.kind == "enum":
        return _custom_enum(fs.enum_name or fs.name, fs.enum_values)
    if fs.kind in ("str", "float"):
        return {"str": str, "float": float}[fs.kind]
    raise ValueError(f"custom ticket field {fs.name}: no input type for kind {fs.kind!r}")


def _opt(tp: Any, desc: str, **kw: Any) -> tuple[Any, Any]:
    return (tp | None, Field(default=None, description=desc, **kw))


def _req(tp: Any, desc: str, **kw: Any) -> tuple[Any, Any]:
    return (tp, Field(..., description=desc, **kw))


def _ticket_fields(variant: Variant, update: bool) -> dict[str, Any]:
    tags_type: Any = str if variant.csv_lists else list[str]
    tags_desc = "Ticket tags, comma-separated." if variant.csv_lists else "Ticket tags."
    subject = (
        _opt(str, "Short summary of the ticket.", min_length=1)
        if update
        else _req(str, "Short summary of the ticket.", min_length=1)
    )
    fields: dict[str, Any] = {
        "subject": subject,
        "description": _opt(str, "Longer explanation of the request."),
        "status": _opt(TicketStatus, "Ticket status."),
        "priority": _opt(TicketPriority, "Ticket priority."),
        "type": _opt(TicketType, "Kind of ticket."),
        "requester_id": _opt(str, "User id of the person asking."),
        "assignee_id": _opt(str, "User id of the agent handling it."),
        "organization_id": _opt(str, "Organization id."),
        "tags": _opt(tags_type, tags_desc),
        "due_at": _opt(str, "Due date/time (ISO 8601 text)."),
    }
    for fs in variant.ticket_fields:
        fields[fs.name] = _opt(_custom_type(fs), f"Custom ticket field '{fs.name}'.")
    return fields


def _user_fields(update: bool) -> dict[str, Any]:
    need = _opt if update else _req
    return {
        "name": need(str, "Full name of the user.", min_length=1),
        "email": need(str, "Email address of the user."),
        "role": _opt(UserRole, "User role."),
        "organization_id": _opt(str, "Organization the user belongs to."),
        "phone": _opt(str, "Phone number."),
        "verified": _opt(bool, "Whether the user's identity is verified."),
        "active": _opt(bool, "Whether the account is active."),
    }


def _organization_fields(variant: Variant, update: bool) -> dict[str, Any]:
    need = _opt if update else _req
    domains: Any = str if variant.csv_lists else list[str]
    return {
        "name": need(str, "Organization name.", min_length=1),
        "domain_names": _opt(domains, "Email domains of the organization."),
        "details": _opt(str, "Free-text details."),
        "notes": _opt(str, "Free-text notes."),
    }


def _comment_fields(update: bool) -> dict[str, Any]:
    need = _opt if update else _req
    return {
        "ticket_id": need(str, "Ticket the comment belongs to."),
        "author_id": need(str, "User who wrote the comment."),
        "body": need(str, "Comment text.", min_length=1),
        "public": _opt(bool, "Whether the requester can see the comment."),
    }


def _ticket_comment_fields() -> dict[str, Any]:
    return {
        "ticket_id": _req(int, "Numeric ticket id."),
        "author_id": _req(int, "Numeric author id."),
        "body": _req(str, "Comment text.", min_length=1),
        "html_body": _opt(str, "HTML rendering of the comment (generated when omitted)."),
        "public": _opt(bool, "Whether the requester can see the comment."),
        "ItemInternalId": _opt(str, "Internal item identifier."),
    }


def _shape(name: str, doc: str, fields: dict[str, Any]) -> type[BaseModel]:
    model: type[BaseModel] = create_model(name, __config__=_SHAPE_CONFIG, __doc__=doc, **fields)
    return model


@functools.cache
def create_shapes(variant: Variant) -> tuple[type[BaseModel], ...]:
    return (
        _shape("TicketCreateInput", "Fields of a new ticket.", _ticket_fields(variant, update=False)),
        _shape("UserCreateInput", "Fields of a new user.", _user_fields(update=False)),
        _shape(
            "OrganizationCreateInput", "Fields of a new organization.", _organization_fields(variant, False)
        ),
        _shape("CommentCreateInput", "Fields of a new comment.", _comment_fields(update=False)),
        _shape("TicketCommentCreateInput", "Fields of a new ticket comment.", _ticket_comment_fields()),
    )


@functools.cache
def update_shapes(variant: Variant) -> tuple[type[BaseModel], ...]:
    return (
        _shape("TicketUpdateInput", "Ticket fields to change.", _ticket_fields(variant, update=True)),
        _shape("UserUpdateInput", "User fields to change.", _user_fields(update=True)),
        _shape(
            "OrganizationUpdateInput", "Organization fields to change.", _organization_fields(variant, True)
        ),
        _shape("CommentUpdateInput", "Comment fields to change.", _comment_fields(update=True)),
    )


@functools.cache
def create_input(variant: Variant) -> type[BaseModel]:
    union: Any = Union[create_shapes(variant)]  # noqa: UP007  (a runtime-built union)
    model: type[BaseModel] = create_model(
        "CreateItemInput",
        __base__=ZendeskInput,
        __doc__="Arguments of zendesk_create_item.",
        table=(TableName, Field(..., description="Table to add the record to.")),
        item=(union, Field(..., description="The new record; its fields depend on the table.")),
    )
    return model


@functools.cache
def update_input(variant: Variant) -> type[BaseModel]:
    union: Any = Union[update_shapes(variant)]  # noqa: UP007
    model: type[BaseModel] = create_model(
        "UpdateItemInput",
        __base__=ZendeskInput,
        __doc__="Arguments of zendesk_update_item.",
        table=(TableName, Field(..., description="Table holding the record.")),
        id=(str, Field(..., description="Id of the record to change.")),
        item=(union, Field(..., description="Only the fields to change; null values are left alone.")),
    )
    return model


class GetItemInput(ZendeskInput):
    """Arguments of zendesk_get_item."""

    table: TableName = Field(description="Table holding the record.")
    id: str = Field(description="Id of the record to fetch.")


class DeleteItemInput(ZendeskInput):
    """Arguments of zendesk_delete_item."""

    table: TableName = Field(description="Table holding the record (ticket comments cannot be deleted).")
    id: str = Field(description="Id of the record to remove.")


class GetTablesInput(ZendeskInput):
    """zendesk_get_tables takes no arguments."""


class GetItemsInput(ZendeskInput):
    """Arguments of zendesk_get_items (OData options also accepted without the `$`)."""

    model_config = ConfigDict(extra="ignore", validate_by_name=True, validate_by_alias=True)

    table: TableName = Field(description="Table to list.")
    filter: str | None = Field(
        default=None, alias="$filter", description="OData filter expression, e.g. \"status eq 'open'\"."
    )
    orderby: str | None = Field(
        default=None, alias="$orderby", description="Field to sort by, optionally followed by 'desc'."
    )
    skip: int | None = Field(default=None, alias="$skip", ge=0, description="Rows to skip (default 0).")
    top: int | None = Field(
        default=None, alias="$top", ge=1, le=1000, description="Maximum rows to return (default 512)."
    )
    select: str | None = Field(
        default=None, alias="$select", description="Comma-separated field names to return (default: all)."
    )


class SearchArticlesInput(ZendeskInput):
    """Arguments of zendesk_search_articles."""

    query: str = Field(description="Keywords; quoted phrases must match, '-word' excludes.")
    locale: str | None = Field(default=None, description="Only articles in this locale.")
    brand_id: int | None = Field(default=None, description="Only articles of this brand.")
    category: int | None = Field(default=None, description="Only articles of this category id.")
    section: int | None = Field(default=None, description="Only articles of this section id.")
    label_names: str | None = Field(default=None, description="Comma-separated labels; any one must match.")
    multibrand: bool | None = Field(default=None, description="Search across all brands.")


def shape_values(item: BaseModel) -> dict[str, Any]:
    """The explicitly supplied fields of a chosen shape, in shape order, as plain values."""
    out: dict[str, Any] = {}
    for name in type(item).model_fields:
        if name in item.model_fields_set:
            value = getattr(item, name)
            out[name] = value.value if isinstance(value, enum.Enum) else value
    return out
