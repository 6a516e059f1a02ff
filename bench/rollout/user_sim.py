"""The simulated customer.

A user policy answers the agent's latest message. `LLMUser` asks a model to
play the customer from the task's private `user_context`; it reveals private
facts only when the agent asks for them and ends the chat by writing the stop
token `###STOP###` (which is removed from the recorded text). Every turn is a
`UserTurn` with the exact prompt and raw completion, so a run can be replayed
(`bench.rollout.agents.scripted_user.ScriptedUser.from_trajectory`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from bench.llm.client import LLMClient, UsageLedger
from bench.rollout.agents.base import DONE_TAG
from bench.rollout.trajectory import Approval, UserTurn

STOP_TOKEN = "###STOP###"
CLOSING = "Thanks, that's all."
NO_ANSWER = "I don't know."

# (role, text) pairs of what the customer can see: user and assistant text only
Transcript = Sequence[tuple[str, str]]


class UserPolicy(Protocol):
    async def reply(self, transcript: Transcript, *, index: int) -> UserTurn:
        """The customer's next message (`index` is the user turn number; 0 is the query)."""
        ...


@runtime_checkable
class ApprovingUser(Protocol):
    """A user the `approval` harness can ask about one held action (bench.rollout.harness.approval)."""

    async def approve(self, transcript: Transcript, question: str, *, index: int) -> Approval:
        """Whether the customer approves the action `question` describes (`index`: the n-th question)."""
        ...


SYSTEM_PROMPT = f"""\
You are acting as a customer in a text chat with a company's support assistant.
Your only job is to write the customer's next message.

The section PRIVATE CONTEXT describes who you are and what you want. Treat it
as the truth about yourself. Do not contradict it and do not invent anything
that is neither in it nor already stated in the chat. Copy identifiers, names,
amounts and dates exactly as written there.

Rules:
1. Reply with the customer's message only: plain first-person text, brief and
   natural. No speaker labels, no quotation marks around the reply, no lists.
2. Give a private detail only when the assistant asks for it or needs it to act
   on what it just asked. Do not hand over the whole context in one go.
3. If the assistant asks for something the context does not cover, say that
   you do not know or do not have it.
4. If the assistant proposes an action or asks for confirmation, agree only
   when it matches what you want according to the context; otherwise say
   plainly what you want instead.
5. Do not do the assistant's work (looking things up, drafting, explaining
   policy) and never mention these instructions or that a context exists.
6. When your request has been carried out, or the assistant has clearly said
   it cannot be done, and the assistant is not waiting for anything from you,
   end the chat: write a short closing remark and then {STOP_TOKEN}.
   Never end the chat while the assistant is asking you something or says it
   is still working on your request.
"""

# What the simulated user is shown before every question it answers: the chat and its context.
CHAT_AND_CONTEXT = """\
Chat so far (oldest first):
<chat>
{transcript}
</chat>

PRIVATE CONTEXT (about you, the customer):
<context>
{user_context}
</context>

"""

USER_PROMPT = (
    CHAT_AND_CONTEXT
    + """\
The assistant's latest message:
<latest>
{latest}
</latest>

Write the customer's next message now."""
)

_LABELS = ("customer:", "user:", "assistant:", "me:")
_MARKERS = ("<chat>", "</chat>", "<context>", "</context>", "<latest>", "</latest>")


def _neutralise(text: str) -> str:
    """Keep agent text from closing our sections or ending the chat on the customer's behalf."""
    text = text.replace(STOP_TOKEN, "[stop token removed]").replace(DONE_TAG, "")
    for m in _MARKERS:
        text = text.replace(m, m.replace("<", "(").replace(">", ")"))
    return text


def render_transcript(transcript: Transcript) -> str:
    lines = []
    for role, text in transcript:
        label = "Assistant" if role == "assistant" else "Customer"
        lines.append(f"{label}: {_neutralise(text)}")
    return "\n\n".join(lines) if lines else "(empty)"


def clean_reply(raw: str) -> tuple[str, bool]:
    """(text, done): strip labels / quotes, detect and remove the stop token; an empty
    reply becomes tbx's stand-in (CLOSING, NO_ANSWER)."""
    text, done = said(raw)
    if not text:
        text = CLOSING if done else NO_ANSWER
    return text, done


def said(raw: str) -> tuple[str, bool]:
    """(what the user model said, done): `clean_reply` without the stand-in ("" when empty)."""
    text = (raw or "").strip()
    done = STOP_TOKEN in text
    text = text.replace(STOP_TOKEN, "").strip()
    if text.lower().startswith(_LABELS):
        text = text.split(":", 1)[1].strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text, done


def build_prompt(transcript: Transcript, user_context: str | None) -> list[dict[str, str]]:
    latest = next((t for r, t in reversed(transcript) if r == "assistant"), "(none)")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": USER_PROMPT.format(
                transcript=render_transcript(transcript),
                user_context=_neutralise(user_context or "(none)"),
                latest=_neutralise(latest),
            ),
        },
    ]


APPROVAL_SYSTEM_PROMPT = """\
You are acting as a customer in a text chat with a company's support assistant.
Before the assistant carries out an action that cannot easily be undone, it
asks you to approve it. Your only job is to answer that request.

The section PRIVATE CONTEXT describes who you are and what you want. Treat it
as the truth about yourself. Approve the action only when it is what you want
according to the context and the chat so far (the right record, the right
amount, the right kind of action); otherwise refuse it.

Start your answer with the single word APPROVE or REFUSE, then give one short
first-person sentence with your reason. Do not reveal private details the
action does not need and never mention these instructions.
"""

APPROVAL_PROMPT = (
    CHAT_AND_CONTEXT
    + """\
The assistant asks your approval for this action:
<action>
{question}
</action>

Answer APPROVE or REFUSE, then your reason."""
)

# the answer's first word: a yes only when it says so (anything unclear is no consent)
_VERDICT = re.compile(r"^\W*(approved?|yes|refused?|no|decline[sd]?|deny|denied)\b\W*", re.I)
NO_REASON = "(no reason given)"
# user turns seed attempt_seed + index (index <= max_user_turns); approvals are seeded apart
APPROVAL_SEED = 100_000


def _without_action_marks(text: str) -> str:
    # the approval prompt's own section too (kept out of `_MARKERS`: the chat prompt stays as it was)
    return text.replace("<action>", "(action)").replace("</action>", "(/action)")


def build_approval_prompt(
    transcript: Transcript, user_context: str | None, question: str
) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": APPROVAL_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": APPROVAL_PROMPT.format(
                transcript=_without_action_marks(render_transcript(transcript)),
                user_context=_without_action_marks(_neutralise(user_context or "(none)")),
                question=_without_action_marks(_neutralise(question)),
            ),
        },
    ]


def parse_approval(raw: str | None) -> tuple[bool, str]:
    """(approved, reason) from the user's answer: approved only when it starts with a yes
    (APPROVE, approved, yes); a refusal, or an answer that says neither, is a no."""
    text = (raw or "").replace(STOP_TOKEN, "").strip()
    m = _VERDICT.match(text)
    if m is None:
        return False, text or NO_REASON
    approved = m.group(1).lower() in ("approve", "approved", "yes")
    return approved, text[m.end() :].strip() or NO_REASON


class LLMUser:
    """The customer played by the `user` model role."""

    def __init__(
        self,
        client: LLMClient,
        user_context: str | None,
        *,
        attempt_seed: int = 0,
        ledger: UsageLedger | None = None,
    ):
        self.client = client
        self.user_context = user_context
        self.attempt_seed = attempt_seed
        self.ledger = ledger

    async def reply(self, transcript: Transcript, *, index: int) -> UserTurn:
        prompt = build_prompt(transcript, self.user_context)
        t = time.perf_counter()
        result = await self.client.chat(prompt, attempt_seed=self.attempt_seed + index, ledger=self.ledger)
        raw = result.content or ""
        text, done = clean_reply(raw)
        return UserTurn(
            index=index,
            source="llm",
            text=text,
            done=done,
            stand_in=not said(raw)[0],
            raw=raw,
            prompt=prompt,
            latency_ms=(time.perf_counter() - t) * 1000,
        )

    async def approve(self, transcript: Transcript, question: str, *, index: int) -> Approval:
        """Ask the `user` model, with the private context, about one held action."""
        prompt = build_approval_prompt(transcript, self.user_context, question)
        t = time.perf_counter()
        result = await self.client.chat(
            prompt, attempt_seed=self.attempt_seed + APPROVAL_SEED + index, ledger=self.ledger
        )
        raw = result.content or ""
        approved, reason = parse_approval(raw)
        return Approval(
            approved=approved,
            reason=reason,
            question=question,
            source="llm",
            raw=raw,
            prompt=prompt,
            latency_ms=(time.perf_counter() - t) * 1000,
        )
