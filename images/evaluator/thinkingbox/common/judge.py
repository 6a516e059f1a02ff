"""`Judge`: the yes/no questions a test asks (spec §7), put to the rubric model through
tbx: `ask(system, user)` sends them out of the sandbox and returns the model's text.
The prompt layouts and answer rules are tbx's judge/yesno.py, copied in as _yesno."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _yesno as rules

__all__ = ["Judge", "JudgeException"]


class JudgeException(Exception):
    """The judge could not answer (the model failed, or tbx refused the question)."""

    def __init__(self, message: str, cause: str = "judge") -> None:
        super().__init__(message)
        self.cause = cause  # "judge": the model's failure; "test": a limit the test hit


class Judge:
    def __init__(self, ask: Callable[[str, str], str], judge_type: str = "legacy") -> None:
        if judge_type not in ("legacy", "motivation"):
            raise ValueError(f"unknown judge_type {judge_type!r} (legacy or motivation)")
        self._ask = ask
        self.judge_type = judge_type
        self._decisions: list[dict[str, Any]] = []

    def _complete(self, system: str, user: str) -> str:
        try:
            return self._ask(system, user)
        except JudgeException:
            raise
        except Exception as exc:
            raise JudgeException(f"Error getting Judge completion: {exc}") from exc

    def text_yesno(self, text: str, question: str) -> bool:
        if self.judge_type == "motivation":
            return bool(self.text_yesno_with_motivation(text, question)["answer"])
        return self.text_yesno_legacy(text, question)

    def text_yesno_legacy(self, text: str, question: str) -> bool:
        return rules.yes_token(self._complete(rules.TEXT_YESNO_SYSTEM, rules.text_user(text, question)))

    def text_yesno_with_motivation(self, text: str, question: str) -> dict[str, Any]:
        answer = rules.parse_motivation(
            self._complete(rules.MOTIVATION_SYSTEM, rules.text_user(text, question))
        )
        self._decisions.append(
            {
                "question": question,
                "answer": bool(answer["answer"]),
                "motivation": answer.get("motivation", ""),
            }
        )
        return answer

    def compare_yesno(self, first: str, second: str, question: str) -> bool:
        return rules.yes_token(
            self._complete(rules.COMPARE_SYSTEM, rules.compare_user(first, second, question))
        )

    def yesno(self, question: str) -> bool:
        return rules.yes_token(self._complete(rules.YESNO_SYSTEM, question))

    def no_repeat(self, first: str, second_list: list[str]) -> bool:
        return not any(self.compare_yesno(first, second, rules.NO_REPEAT_QUESTION) for second in second_list)

    def evaluate_bool(self, system: str, user: str) -> bool:
        return rules.yes_token(self._complete(system, user))

    def drain_decisions(self) -> list[dict[str, Any]]:
        out, self._decisions = self._decisions, []
        return out
