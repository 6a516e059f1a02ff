"""Degreed: the training catalog, enrollments and certifications."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, new_id, opt, pick
from servers.engine.tools import ToolContext, ToolInput

COURSES = "degreed_training_courses"
ENROLLMENTS = "degreed_training_enrollments"
CERTIFICATIONS = "degreed_certifications"
UNLIMITED = 99999
COURSE_FIELDS = (
    "id",
    "title",
    "cost",
    "training_category",
    "max_seats",
    "start_date",
    "end_date",
    "prerequisites",
)
CERT_FIELDS = ("id", "employee_email", "certification_name", "issued_date", "expiry_date")


class DegreedInput(ToolInput):
    action: Literal[
        "search_courses",
        "get_course_details",
        "check_enrollment",
        "enroll_employee",
        "get_training_history",
        "check_certification_status",
        "get_required_trainings",
    ] = Field(description="What to do.")
    keyword: str | None = opt("Text to look for in course titles (search_courses).")
    category: Literal["must_have", "nice_to_have", "conference"] | None = opt(
        "Only courses of this category (search_courses, optional)."
    )
    course_id: str | None = opt("Course id (get_course_details, check_enrollment, enroll_employee).")
    email: str | None = opt(
        "Employee email address (enroll_employee, get_training_history, check_certification_status)."
    )
    certification_name: str | None = opt("Certification to look for (check_certification_status).")
    client_id: str | None = opt("Client id (get_required_trainings).")


def _course(ctx: ToolContext, course_id: str) -> dict[str, Any]:
    row = ctx.db.require(COURSES, course_id, f"Course not found: {course_id}")
    return row


def _completed(ctx: ToolContext, email: str) -> list[str]:
    return [
        r["course_id"]
        for r in ctx.db.find(ENROLLMENTS, employee_email=email)
        if r["completion_date"] is not None
    ]


@action("keyword")
def search_courses(ctx: ToolContext, args: Any) -> Any:
    needle = args.keyword.lower()
    return {
        "courses": [
            pick(r, COURSE_FIELDS)
            for r in ctx.db.all(COURSES)
            if needle in r["title"].lower()
            and (args.category is None or r["training_category"] == args.category)
        ]
    }


@action("course_id")
def get_course_details(ctx: ToolContext, args: Any) -> Any:
    return {"course_data": pick(_course(ctx, args.course_id), COURSE_FIELDS)}


@action("course_id")
def check_enrollment(ctx: ToolContext, args: Any) -> Any:
    course = _course(ctx, args.course_id)
    if course["max_seats"] is None:
        return {"available_seats": UNLIMITED}
    active = [r for r in ctx.db.find(ENROLLMENTS, course_id=course["id"]) if r["completion_date"] is None]
    return {"available_seats": course["max_seats"] - len(active)}


@action("email", "course_id")
def enroll_employee(ctx: ToolContext, args: Any) -> Any:
    course = _course(ctx, args.course_id)
    ctx.db.insert(
        ENROLLMENTS,
        {"id": new_id(ctx, ENROLLMENTS, "ENR"), "employee_email": args.email, "course_id": course["id"]},
    )
    return SUCCESS


@action("email")
def get_training_history(ctx: ToolContext, args: Any) -> Any:
    return {
        "completed_trainings": [{"course_id": c} for c in _completed(ctx, args.email)],
        "certifications": [
            pick(r, CERT_FIELDS) for r in ctx.db.find(CERTIFICATIONS, employee_email=args.email)
        ],
    }


@action("email", "certification_name")
def check_certification_status(ctx: ToolContext, args: Any) -> Any:
    wanted = args.certification_name.lower()
    rows = ctx.db.find(CERTIFICATIONS, employee_email=args.email)
    return {"has_certification": any(r["certification_name"].lower() == wanted for r in rows)}


@action("client_id")
def get_required_trainings(ctx: ToolContext, args: Any) -> Any:
    client = ctx.db.require("salesforce_crm_clients", args.client_id, f"Client not found: {args.client_id}")
    return {"required_courses": list(client["required_training_courses"])}


TOOLS = (
    api_tool(
        "degreed_api",
        DegreedInput,
        "Learning platform. search_courses: courses by title text (and category); get_course_details: one "
        "course; check_enrollment: open seats of a course; enroll_employee: sign an employee up for a course; "
        "get_training_history: completed courses and certifications of an employee; "
        "check_certification_status: whether an employee holds a certification; get_required_trainings: "
        "courses a client requires.",
        "Degreed",
        {
            "search_courses": search_courses,
            "get_course_details": get_course_details,
            "check_enrollment": check_enrollment,
            "enroll_employee": enroll_employee,
            "get_training_history": get_training_history,
            "check_certification_status": check_certification_status,
            "get_required_trainings": get_required_trainings,
        },
    ),
)
