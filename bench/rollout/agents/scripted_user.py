"""A user that needs no model: replies from a fixed list, then closes.

The built-in agents pair with `ScriptedUser()` (after the query, it says
"Thanks, that's all." and ends the chat). `ScriptedUser.from_trajectory`
replays the user turns recorded in an earlier trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.rollout.trajectory import Trajectory, UserTurn
from bench.rollout.user_sim import CLOSING, Transcript


class ScriptedUser:
    def __init__(self, replies: Sequence[str] = (), *, closing: str = CLOSING, end: bool = True):
        """Answer with `replies` in order; after them send `closing` and, when `end`, end the chat."""
        self.replies = list(replies)
        self.closing = closing
        self.end = end

    async def reply(self, transcript: Transcript, *, index: int) -> UserTurn:
        i = index - 1  # index 0 is the task's query, sent by the loop
        if 0 <= i < len(self.replies):
            return UserTurn(index=index, source="scripted", text=self.replies[i])
        return UserTurn(index=index, source="scripted", text=self.closing, done=self.end)

    @staticmethod
    def from_trajectory(trajectory: Trajectory) -> ScriptedUser:
        """Replay the user turns recorded in `trajectory`; when they run out, close the chat."""
        turns: list[UserTurn] = [t for t in trajectory.user_turns if t.source not in ("query", "harness")]
        if turns and turns[-1].done:
            return ScriptedUser([t.text for t in turns[:-1]], closing=turns[-1].text, end=True)
        return ScriptedUser([t.text for t in turns])
