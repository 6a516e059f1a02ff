"""The rubric judge's two styles against a fake completion: the reference style's
exact request and yes-token reading, the json style's re-ask, an empty final message
asked like any other, and what each question cost."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from judge import Completion, JudgeUnavailable, RubricJudge
from judge.rubric import REMINDER, SYSTEM_PROMPT
from judge.yesno import TEXT_YESNO_SYSTEM

Reply = Callable[[list[dict[str, str]]], str | None]


class FakeModel:
    """A deterministic judge: the reply is a function of the request (as at temperature 0);
    each request costs 100 input tokens (40 cached), 3 output tokens and 2 HTTP requests."""

    def __init__(self, reply: Reply):
        self.reply = reply
        self.requests: list[list[dict[str, str]]] = []

    async def __call__(self, messages: list[dict[str, str]]) -> Completion:
        self.requests.append(messages)
        return Completion(
            text=self.reply(messages), requests=2, input_tokens=100, output_tokens=3, cached_tokens=40
        )


def saying(text: str | None) -> FakeModel:
    return FakeModel(lambda _messages: text)


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Yes", "yes"),
        ("yes.", "yes"),
        ("Answer: Yes", "yes"),
        ("No, yes", "yes"),  # the last word counts too, as the reference reads it
        ("**Yes**", "no"),
        ("Yes!", "no"),
        ("No", "no"),
        ("", "no"),
        (None, "no"),  # no text (a tool call, no choice): no, never a judge error
        ('{"answer": "yes", "reason": "r"}', "no"),  # the json style's reply means nothing here
    ],
)
async def test_reference_style_reads_the_first_or_last_word(reply: str | None, answer: str) -> None:
    model = saying(reply)
    got = await RubricJudge(model, model="m").ask("Q?", "Your refund is on its way.")
    assert (got.answer, got.error, got.reason) == (answer, None, "")
    assert got.raw == (reply or "") and got.model == "m"
    assert len(model.requests) == 1  # every reply is a yes or a no: never asked again


async def test_reference_style_request_is_the_benchmarks_layout() -> None:
    model = saying("Yes")
    await RubricJudge(model, model="m").ask("Is it <ok>?", "ok <b>bold</b> & done")
    assert model.requests == [
        [
            {"role": "system", "content": TEXT_YESNO_SYSTEM},
            # the message encoded (angle brackets only), the question as it is, no trailing newline
            {
                "role": "user",
                "content": "<message>\nok &lt;b&gt;bold&lt;/b&gt; & done\n</message>\nIs it <ok>?",
            },
        ]
    ]


@pytest.mark.parametrize("style", ["reference", "json"])
@pytest.mark.parametrize("final", ["", None, "  "])
async def test_an_empty_final_message_is_asked(style: str, final: str | None) -> None:
    """A rubric may define Yes as "the topic is not mentioned": the judge decides, not tbx."""
    model = saying("Yes" if style == "reference" else '{"answer": "yes", "reason": "nothing said"}')
    got = await RubricJudge(model, model="m", style=style).ask("Is refunds not mentioned?", final)  # type: ignore[arg-type]
    assert got.answer == "yes" and len(model.requests) == 1
    user = model.requests[0][1]["content"]
    if style == "reference":
        assert user == f"<message>\n{final or ''}\n</message>\nIs refunds not mentioned?"
    else:
        assert f"<<<\n{final or ''}\n>>>" in user


async def test_json_style_asks_again_with_a_reminder_and_sums_the_cost() -> None:
    """The re-ask is another request, so a deterministic judge can answer it otherwise."""
    model = FakeModel(
        lambda messages: (
            '{"answer": "no", "reason": "r"}' if "could not be read" in messages[-1]["content"] else "No."
        )
    )
    got = await RubricJudge(model, model="m", style="json").ask("Q?", "text")
    assert (got.answer, got.reason, got.error) == ("no", "r", None)
    first, second = model.requests
    assert first[0] == second[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert first[1] != second[1]
    assert second[1]["content"].startswith(first[1]["content"])
    assert second[1]["content"] == first[1]["content"] + REMINDER.format(error="not JSON: 'No.'")
    assert got.usage == {"input_tokens": 200, "output_tokens": 6, "cached_tokens": 80, "requests": 4}
    assert got.requests == 4


async def test_json_style_judge_error_after_the_re_ask() -> None:
    model = saying("Yes")
    got = await RubricJudge(model, model="m", style="json", parse_attempts=3).ask("Q?", "text")
    assert got.answer is None and not got.passed and got.error == "judge error: not JSON: 'Yes'"
    assert len(model.requests) == 3
    # every re-ask is the first request with one reminder, not reminders piled up
    assert model.requests[1] == model.requests[2] != model.requests[0]
    assert got.usage == {"input_tokens": 300, "output_tokens": 9, "cached_tokens": 120, "requests": 6}


async def test_reference_style_usage_is_the_one_request() -> None:
    got = await RubricJudge(saying("Yes"), model="m").ask("Q?", "text")
    assert got.usage == {"input_tokens": 100, "output_tokens": 3, "cached_tokens": 40, "requests": 2}
    assert got.requests == 2


async def test_an_unavailable_judge_stays_a_system_error() -> None:
    async def down(messages: list[dict[str, str]]) -> Completion:
        raise JudgeUnavailable("judge model 'm' unavailable after 7 attempts")

    for style in ("reference", "json"):
        with pytest.raises(JudgeUnavailable):
            await RubricJudge(down, model="m", style=style).judge(["Q1", "Q2"], "text")  # type: ignore[arg-type]


def test_an_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown rubric judge style 'legacy'"):
        RubricJudge(saying("Yes"), model="m", style="legacy")  # type: ignore[arg-type]
