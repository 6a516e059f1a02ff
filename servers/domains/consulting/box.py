"""Box: document folders and folder sharing."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, new_id, opt, pick
from servers.engine.tools import ToolContext, ToolInput

FOLDERS = "box_folders"
ACCESS = "box_folder_access_logs"


class BoxInput(ToolInput):
    action: Literal["get_folder_details", "grant_folder_access"] = Field(description="What to do.")
    folder_id: str | None = opt("Folder id (both actions).")
    email: str | None = opt("Employee email address (grant_folder_access).")
    permission_level: Literal["viewer", "editor", "co_owner"] | None = opt(
        "Permission to give (grant_folder_access)."
    )


def _folder(ctx: ToolContext, folder_id: str) -> dict[str, Any]:
    row = ctx.db.require(FOLDERS, folder_id, f"Folder not found: {folder_id}")
    return row


@action("folder_id")
def get_folder_details(ctx: ToolContext, args: Any) -> Any:
    fields = ("id", "folder_name", "confidentiality_level", "owner_email", "client_id", "engagement_code")
    return {"folder_data": pick(_folder(ctx, args.folder_id), fields)}


@action("email", "folder_id", "permission_level")
def grant_folder_access(ctx: ToolContext, args: Any) -> Any:
    folder = _folder(ctx, args.folder_id)
    ctx.db.insert(
        ACCESS,
        {
            "id": new_id(ctx, ACCESS, "FAL"),
            "folder_id": folder["id"],
            "employee_email": args.email,
            "permission_level": args.permission_level,
        },
    )
    return SUCCESS


TOOLS = (
    api_tool(
        "box_api",
        BoxInput,
        "Document folders. get_folder_details: a folder's owner, confidentiality and client/engagement; "
        "grant_folder_access: share a folder with an employee.",
        "Box",
        {"get_folder_details": get_folder_details, "grant_folder_access": grant_folder_access},
    ),
)
