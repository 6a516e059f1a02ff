"""How a ThinkingBox judge question is put to a model and how its answer is read
(the reference's `Judge` semantics, in tbx's own words): the prompt layouts, the
encoding of quoted text, the yes-token rule and the JSON rule of the motivation mode.

One home for these rules: the native rubric judge (`judge.rubric`) asks with them, and
the evaluator image carries this file beside its `thinkingbox.common` module, whose
`Judge` asks with them inside the test-function sandbox. Standard library only, so it
runs there unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "COMPARE_SYSTEM",
    "MOTIVATION_SYSTEM",
    "NO_REPEAT_QUESTION",
    "PARSE_FAILED",
    "TEXT_YESNO_SYSTEM",
    "YESNO_SYSTEM",
    "compare_user",
    "encode",
    "parse_motivation",
    "text_user",
    "yes_token",
]

TEXT_YESNO_SYSTEM = (
    "You are acting as a judge. You will be shown a message, enclosed between <message> and "
    "</message>, and after it a question about that message. Reply with one word only: Yes or No."
)

MOTIVATION_SYSTEM = (
    "You are acting as a judge. You will be shown a message, enclosed between <message> and "
    "</message>, and after it a question about that message. The message may be a short exchange "
    "between a user and an assistant; judge only what the assistant says. Reply with a JSON object "
    'with two keys: "motivation", a quoted explanation of one or two sentences, and "answer", '
    "the quoted word Yes or No."
)

COMPARE_SYSTEM = (
    "You are acting as a judge. You will be shown two messages, the first enclosed between <first> "
    "and </first>, the second between <second> and </second>, and after them a question. "
    "Reply with one word only: Yes or No."
)

YESNO_SYSTEM = (
    "You are acting as a judge and answer the question you are asked with one word only: Yes or No."
)

NO_REPEAT_QUESTION = "Does the first message repeat the content of the second message?"

PARSE_FAILED = "Failed to parse response"

_SEPARATORS = str.maketrans({".": " ", ",": " ", ";": " ", ":": " ", "\n": " "})


def encode(text: str) -> str:
    """Quoted text as the judge sees it: angle brackets escaped, nothing else."""
    return text.replace("<", "&lt;").replace(">", "&gt;")


def text_user(text: str, question: str) -> str:
    """The user message of a question about one text (the question is not encoded)."""
    return f"<message>\n{encode(text)}\n</message>\n{question}"


def compare_user(first: str, second: str, question: str) -> str:
    return f"<first>\n{encode(first)}\n</first>\n<second>\n{encode(second)}\n</second>\n{question}"


def yes_token(answer: str) -> bool:
    """Yes iff the first or the last word of the answer is "yes" (any case), once the
    characters . , ; : and newline count as spaces. Anything else, an empty answer too, is no:
    `Yes!` and `**Yes**` are no, `No, yes` is yes (the reference's rule, kept as it is so
    verdicts stay comparable)."""
    words = answer.translate(_SEPARATORS).split()
    if not words:
        return False
    return words[0].lower() == "yes" or words[-1].lower() == "yes"


_QUOTED_KEY = re.compile(r"'(answer|motivation)'(\s*):")
_BARE_KEY = re.compile(r"(^|[{,])(\s*)(answer|motivation)(\s*):")


def parse_motivation(answer: str) -> dict[str, Any]:
    """The motivation mode's reading of an answer: the keys `answer` and `motivation` are
    quoted where they were single-quoted or bare, then the text must parse as JSON. Text
    that does not parse is a silent no. Parsed JSON that is not an object with a string
    `answer` raises (TypeError, KeyError or AttributeError), as the reference's does: the
    caller reports it as an error of the question, never as a yes."""
    repaired = _QUOTED_KEY.sub(r'"\1"\2:', answer)
    repaired = _BARE_KEY.sub(r'\1\2"\3"\4:', repaired)
    try:
        parsed = json.loads(repaired)
    except ValueError:
        return {"answer": False, "motivation": PARSE_FAILED}
    if not isinstance(parsed, dict):
        raise TypeError(f"the judge's answer is JSON but not an object: {answer[:200]!r}")
    value = parsed["answer"]
    if not isinstance(value, str):
        raise AttributeError(f"the judge's 'answer' is not a string: {value!r}")
    return {**parsed, "answer": yes_token(value)}
