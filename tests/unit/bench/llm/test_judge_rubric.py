"""Strict parsing of the rubric judge's replies, and its configuration."""

from __future__ import annotations

import pytest

from bench.llm.config import ModelsConfigError, judge_role_from_env
from judge import JudgeReplyError, parse_judge_reply


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"answer": "yes", "reason": "states the refund"}', ("yes", "states the refund")),
        ('  {"answer": "no", "reason": ""}\n', ("no", "")),
        ('```json\n{"answer": "no", "reason": "r"}\n```', ("no", "r")),
        ('```\n{"answer": "yes", "reason": "r"}\n```', ("yes", "r")),
    ],
)
def test_accepts_exactly_the_required_object(text: str, want: tuple[str, str]) -> None:
    assert parse_judge_reply(text) == want


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "yes",
        "Yes.",
        '{"answer": "Yes", "reason": "r"}',  # case matters
        '{"answer": "y", "reason": "r"}',
        '{"answer": true, "reason": "r"}',
        '{"answer": "yes"}',  # reason required
        '{"answer": "yes", "reason": "r", "confidence": 0.9}',  # nothing else
        '{"answer": "yes", "reason": 3}',
        '["yes", "r"]',
        'The answer is {"answer": "yes", "reason": "r"}',  # prose around the object
        '{"answer": "yes", "reason": "r"} {"answer": "no", "reason": "r"}',
        '```json\n{"answer": "yes", "reason": "r"}\n``` and more',
        '{"answer": "yes", "reason": "r"',
    ],
)
def test_anything_else_is_a_judge_error(text: str | None) -> None:
    with pytest.raises(JudgeReplyError):
        parse_judge_reply(text)


def test_judge_role_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBX_JUDGE_MODEL", raising=False)
    with pytest.raises(ModelsConfigError, match="no judge model"):
        judge_role_from_env()
    monkeypatch.setenv("TBX_JUDGE_MODEL", "m1")
    monkeypatch.setenv("TBX_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TBX_JUDGE_API_KEY", "secret-key")
    cfg = judge_role_from_env()
    assert (cfg.model, cfg.base_url, cfg.resolved_api_key()) == ("m1", "http://127.0.0.1:9/v1", "secret-key")
    assert "secret-key" not in repr(cfg) and "secret-key" not in cfg.model_dump_json()
    assert "secret-key" not in str(cfg.public_dict())
    assert judge_role_from_env(model="m2", base_url=None).model == "m2"
    monkeypatch.delenv("TBX_JUDGE_API_KEY")
    monkeypatch.delenv("TBX_JUDGE_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    cfg = judge_role_from_env()
    assert (cfg.base_url, cfg.resolved_api_key()) == ("https://api.openai.com/v1", "openai-key")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelsConfigError, match="set TBX_JUDGE_API_KEY or OPENAI_API_KEY"):
        judge_role_from_env()  # the hosted API needs a key
    assert (
        judge_role_from_env(base_url="http://127.0.0.1:9/v1").resolved_api_key() is None
    )  # a local one does not
