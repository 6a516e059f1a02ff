"""A user that needs no model: replies from a fixed list, then closes.

The built-in agents pair with `ScriptedUser()` (after the query, it says
"Thanks, that's all." and ends the chat). `ScriptedUser.from_trajectory`
replays the user turns recorded in an earlier trajectory, and the answers it
gave to the `approval` harness.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.rollout.trajectory import Approval, Trajectory, UserTurn
from bench.rollout.user_sim import CLOSING, Transcript, parse_approval

APPROVE = "APPROVE"


class ScriptedUser:
    def __init__(
        self,
        replies: Sequence[str] = (),
        *,
        closing: str = CLOSING,
        end: bool = True,
        approvals: Sequence[str] = (),
    ):
        """Answer with `replies` in order; after them send `closing` and, when `end`, end the chat.
        `approvals`: the answers to the `approval` harness's questions in order (e.g. "APPROVE",
        "REFUSE I wanted a replacement"); after them every held action is approved."""
        self.replies = list(replies)
        self.closing = closing
        self.end = end
        self.approvals = list(approvals)

    async def reply(self, transcript: Transcript, *, index: int) -> UserTurn:
        i = index - 1  # index 0 is the task's query, sent by the loop
        if 0 <= i < len(self.replies):
            return UserTurn(index=index, source="scripted", text=self.replies[i])
        return UserTurn(index=index, source="scripted", text=self.closing, done=self.end)

    async def approve(self, transcript: Transcript, question: str, *, index: int) -> Approval:
        raw = self.approvals[index] if 0 <= index < len(self.approvals) else APPROVE
        approved, reason = parse_approval(raw)
        return Approval(approved=approved, reason=reason, question=question, source="scripted", raw=raw)

    @staticmethod
    def from_trajectory(trajectory: Trajectory) -> ScriptedUser:
        """Replay the user turns recorded in `trajectory` (and its approval answers); when they
        run out, close the chat."""
        turns: list[UserTurn] = [t for t in trajectory.user_turns if t.source not in ("query", "harness")]
        approvals = [_answer(c.approval) for c in trajectory.tool_calls if c.approval is not None]
        if turns and turns[-1].done:
            return ScriptedUser(
                [t.text for t in turns[:-1]], closing=turns[-1].text, end=True, approvals=approvals
            )
        return ScriptedUser([t.text for t in turns], approvals=approvals)


def _answer(a: Approval) -> str:
    return a.raw if a.raw is not None else f"{APPROVE if a.approved else 'REFUSE'} {a.reason}"
