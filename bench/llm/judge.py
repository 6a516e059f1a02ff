"""The judge role on the shared client: `judge.RubricJudge` takes the model as
a callable (judge imports nothing of bench), and this is that callable.

    async with LLMClient(models.role("judge"), role="judge") as client:
        answers = await rubric_judge(client).judge(task.rubrics, final_message)

The style (reference or json, judge.rubric) is the judge role's `style`
unless the caller names one (`tbx judge regrade` takes the run's). Endpoint
failures after the client's retries become `JudgeUnavailable` (a system
error), worded as the judge always reported them.
"""

from __future__ import annotations

from bench.llm.client import LLMClient, ModelEndpointError
from bench.llm.config import RoleConfig, rubric_style
from judge import MAX_TOKENS, Complete, Completion, JudgeUnavailable, RubricAnswer, RubricJudge, RubricStyle


def judge_completion(client: LLMClient) -> Complete:
    cfg = client.config

    async def complete(messages: list[dict[str, str]]) -> Completion:
        try:
            result = await client.chat(messages, max_tokens=cfg.max_tokens or MAX_TOKENS)
        except ModelEndpointError as exc:
            cause = exc.__cause__ or exc
            if exc.retryable:
                raise JudgeUnavailable(
                    f"judge model {cfg.model!r} at {cfg.base_url} unavailable after {exc.attempts} attempts: "
                    f"{cause.__class__.__name__}: {cause}"
                ) from exc
            raise JudgeUnavailable(f"judge model {cfg.model!r} refused the request: {cause}") from exc
        usage = result.usage
        return Completion(
            text=result.content,
            requests=usage.attempts,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
        )

    return complete


def rubric_judge(client: LLMClient, style: RubricStyle | None = None) -> RubricJudge:
    """A rubric judge asking the model behind `client` (which the caller closes), in
    `style`, else the role's own."""
    return RubricJudge(
        judge_completion(client), model=client.config.model, style=style or rubric_style(client.config)
    )


class LazyRubricJudge:
    """The judge role's rubric answers, its client made on the first rubric task
    (a run without one never opens it); `aclose()` at the end of the run."""

    def __init__(self, role: RoleConfig):
        self.role = role
        self._client: LLMClient | None = None
        self._judge: RubricJudge | None = None

    async def __call__(self, rubrics: list[str], final_message: str) -> list[RubricAnswer]:
        if self._judge is None:
            self._client = LLMClient(self.role, role="judge")
            self._judge = rubric_judge(self._client)
        return await self._judge.judge(rubrics, final_message)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
