"""The text of a system error as a client may see it.

A system error's own message is written for the evaluator: a failed golden
replay names the golden call with its arguments and reply (the answer to the
task), a grading failure may quote expected values or rubric text, a user
simulator failure may quote the user's private context. Anything that
crosses to a client (OpenEnv observations and error messages, Session API
errors, output a client can read) carries only what this module builds:
the cause (the error's fault: bench.run.causes), the error kind (the exception's class name)
and a reference (the attempt id) to look the full text up by in the
evaluator's errors.jsonl. Nothing of the message itself passes, because
no filter can tell a golden value from any other string.
"""

from __future__ import annotations

from bench.run.causes import fault_of, legacy_cause

__all__ = ["client_error_text", "error_kind"]

UNKNOWN_KIND = "Error"


def error_kind(error: BaseException | str) -> str:
    """The class name of `error`, or of a recorded "<class>: <text>" message; a string
    that does not start with an identifier gives "Error" (its text is never echoed)."""
    if isinstance(error, BaseException):
        return error.__class__.__name__
    head = error.split(":", 1)[0].strip()
    return head if head.isidentifier() else UNKNOWN_KIND


def client_error_text(error: BaseException | str, attempt_id: str | None) -> str:
    """`system error (golden replay): GoldenReplayError in attempt A; the full message is in the
    evaluator's errors.jsonl` for an exception, or for a "<class>: <text>" message an older
    record kept without its cause (without an attempt: `...: KeyError; the full message is in
    the server's log`)."""
    kind = error_kind(error)
    cause = fault_of(error).cause if isinstance(error, BaseException) else legacy_cause(error)
    where = (
        f" in attempt {attempt_id}; the full message is in the evaluator's errors.jsonl"
        if attempt_id
        else "; the full message is in the server's log"
    )
    return f"system error ({cause}): {kind}{where}"
