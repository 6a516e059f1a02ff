"""Model endpoints for the three LLM roles of a run (agent, simulated user,
rubric judge) and the price table that turns token usage into money.

The file is YAML::

    defaults:                      # optional, merged under every role
      base_url: http://127.0.0.1:8000/v1
      api_key_env: OPENAI_API_KEY
      timeout: 120
    agent:
      model: my-agent-model
      temperature: 0.0
      seed: 1234                   # the attempt's seed is added to it
      max_tokens: 4096
    user:
      model: my-user-model
    judge:
      model: my-judge-model
      style: reference             # how rubric questions are asked: reference (default) | json
    prices:                        # USD per 1M tokens
      my-agent-model: {input: 1.25, cached: 0.125, output: 10.0}

A role is optional in the file; asking for a missing one raises
`ModelsConfigError`, as does an unknown key (named with its file). Keys are
never written back: `public_dict()` is the redacted form a run manifest may
hash and store. A key is needed only where the endpoint says so: the hosted
OpenAI URL always, any other endpoint when it answers 401/403 (the run's
start-up check and the client then name the variable); an unset `api_key_env`
elsewhere sends no `Authorization` header. `check_models_config` is the one
start-up check `tbx run` and `tbx env serve` share.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from judge import DEFAULT_RUBRIC_STYLE, RubricStyle

Role = Literal["agent", "user", "judge"]
ROLES: tuple[Role, ...] = ("agent", "user", "judge")
OPENAI_URL = "https://api.openai.com/v1"
KEYED_HOSTS = ("api.openai.com",)  # hosted endpoints that always need a key
# What a request with tools asks of the model: OpenAI's default is "auto", but some
# servers (llama-cpp-python's chatml-function-calling) ignore `tools` unless it is sent.
# "omit": send no tool_choice at all.
ToolChoice = Literal["auto", "required", "none", "omit"]


class ModelsConfigError(ValueError):
    """The models config is missing, malformed or lacks what a caller needs."""


class RoleConfig(BaseModel):
    """One OpenAI-compatible chat-completions endpoint and its sampling settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    model: str
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    timeout: float = Field(default=120.0, gt=0)
    # retry policy for 429 / 5xx / timeouts / connection errors
    max_retries: int = Field(default=6, ge=0)
    backoff_initial: float = Field(default=1.0, ge=0)
    backoff_max: float = Field(default=30.0, ge=0)
    # extra fields merged into every request body (e.g. reasoning settings)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    tool_choice: ToolChoice = "auto"
    # requests in flight at once from this process (None: no limit); the time a request
    # waits for a slot is the endpoint's, never the agent's (bench.llm.client)
    max_concurrency: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_key_source(self) -> RoleConfig:
        if self.api_key is not None and self.api_key_env is not None:
            raise ValueError("give api_key or api_key_env, not both")
        return self

    def needs_key(self) -> bool:
        """Whether the endpoint is known to need a key before asking it (the hosted OpenAI API)."""
        return urlsplit(self.base_url).hostname in KEYED_HOSTS

    def resolved_api_key(self) -> str | None:
        """The key to send: `api_key`, else `$api_key_env`, else None (no `Authorization`
        header). An endpoint that needs a key (`needs_key`) without one is an error."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        value = os.environ.get(self.api_key_env) if self.api_key_env is not None else None
        if value:
            return value
        if self.needs_key():
            raise ModelsConfigError(f"{self.base_url} needs an API key: {self.key_hint()}")
        return None

    def key_hint(self) -> str:
        """What to do about a missing or refused key, naming where it comes from (never the key)."""
        if self.api_key_env is not None:
            state = "is set" if os.environ.get(self.api_key_env) else "is not set"
            return f"the environment variable {self.api_key_env} (api_key_env) {state}"
        if self.api_key is not None:
            return "the config's api_key is used"
        return "no key is configured: set api_key_env in the models config"

    def request_seed(self, attempt_seed: int) -> int | None:
        """The seed sent with a request: none unless configured, then offset by the attempt's seed
        (so repeats of one task sample independently but reproducibly)."""
        return None if self.seed is None else self.seed + attempt_seed

    def public_dict(self) -> dict[str, Any]:
        # Settings added later appear only when changed: an older run's bundle stays the same.
        later = {k for k in LATER_DEFAULTS if getattr(self, k) == LATER_DEFAULTS[k]}
        return self.model_dump(exclude={"api_key", *later})


LATER_DEFAULTS: dict[str, Any] = {"tool_choice": "auto", "max_concurrency": None}


class JudgeRoleConfig(RoleConfig):
    """The judge role: an endpoint like the others, and the style its rubric questions
    are asked in (judge.rubric: `reference`, the benchmark's own, or `json`, which
    records why). The style is not in `public_dict`: a manifest records it as its own
    key, `rubric_judge` (bench.run.output)."""

    style: RubricStyle = DEFAULT_RUBRIC_STYLE

    def public_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude={"api_key", "style"})


def rubric_style(role: RoleConfig | None) -> RubricStyle:
    """The style a judge role asks in (the default for a plain role, or none)."""
    return role.style if isinstance(role, JudgeRoleConfig) else DEFAULT_RUBRIC_STYLE


class Price(BaseModel):
    """USD per 1M tokens. `cached` (prompt tokens served from a cache) defaults to `input`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached: float | None = Field(default=None, ge=0)

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """`input_tokens` includes the cached ones (as OpenAI's `prompt_tokens` does)."""
        cached_rate = self.input if self.cached is None else self.cached
        uncached = max(input_tokens - cached_tokens, 0)
        return (uncached * self.input + cached_tokens * cached_rate + output_tokens * self.output) / 1e6


class ModelsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: RoleConfig | None = None
    user: RoleConfig | None = None
    judge: JudgeRoleConfig | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    # Where `tbx run` executes the attempts: a Ray cluster (auto | HOST:PORT); `--ray`
    # wins. Not part of public_dict (the bundle): the same run may resume elsewhere.
    ray: str | None = Field(default=None, min_length=1)
    # Harness interventions on (docs/harness.md), e.g. [error-hints]; `--harness` wins.
    harness: tuple[str, ...] = ()
    # The bound on an attempt's wait on model endpoints (which stops its wall clock), in wall
    # clocks; None: bench.defaults' MODEL_WAIT_FACTOR. Past it: a system error (bench.llm.client).
    model_wait_factor: float | None = Field(default=None, gt=0)

    @field_validator("harness", mode="before")
    @classmethod
    def _harness_names(cls, value: Any) -> tuple[str, ...]:
        from bench.harness_names import parse_harness

        return parse_harness(value)

    def role(self, name: str) -> RoleConfig:
        if name not in ROLES:
            raise ModelsConfigError(f"unknown role {name!r}; roles are {', '.join(ROLES)}")
        cfg: RoleConfig | None = getattr(self, name)
        if cfg is None:
            raise ModelsConfigError(f"the models config has no {name!r} role")
        return cfg

    def price(self, model: str) -> Price | None:
        return self.prices.get(model)

    def cost(self, model: str, input_tokens: int, cached_tokens: int, output_tokens: int) -> float | None:
        """Cost in USD, or None when the model has no price."""
        p = self.price(model)
        return None if p is None else p.cost(input_tokens, cached_tokens, output_tokens)

    def public_dict(self) -> dict[str, Any]:
        """Everything but the keys (for manifests and logs)."""
        out: dict[str, Any] = {}
        for r in ROLES:
            cfg: RoleConfig | None = getattr(self, r)
            if cfg is not None:
                out[r] = cfg.public_dict()
        out["prices"] = {m: p.model_dump() for m, p in sorted(self.prices.items())}
        if self.harness:  # only when on: a plain config's public form (and bundle) is unchanged
            out["harness"] = list(self.harness)
        if self.model_wait_factor is not None:  # likewise: only when set
            out["model_wait_factor"] = self.model_wait_factor
        return out


def parse_models_config(data: Any, source: str = "<config>") -> ModelsConfig:
    data = {} if data is None else data  # an empty file: no roles (a caller that needs one says so)
    if not isinstance(data, dict):
        raise ModelsConfigError(f"{source}: expected a mapping at the top level")
    data = dict(data)
    defaults = data.pop("defaults", None) or {}
    if not isinstance(defaults, dict):
        raise ModelsConfigError(f"{source}: 'defaults' must be a mapping")
    for r in ROLES:
        if r in data and data[r] is not None:
            if not isinstance(data[r], dict):
                raise ModelsConfigError(f"{source}: role {r!r} must be a mapping")
            own = data[r]
            merged = {**defaults, **own}
            # a role that names its own key source replaces the default one
            if "api_key" in own and "api_key_env" not in own:
                merged.pop("api_key_env", None)
            if "api_key_env" in own and "api_key" not in own:
                merged.pop("api_key", None)
            data[r] = merged
    try:
        return ModelsConfig.model_validate(data)
    except ValidationError as exc:
        raise ModelsConfigError(f"{source}: {'; '.join(_problem(e) for e in exc.errors())}") from None


def _problem(error: Any) -> str:
    """One validation problem in the file's words: an unknown key is named with where it was
    found and what is allowed there."""
    loc = [str(p) for p in error["loc"]]
    if error["type"] == "extra_forbidden" and loc:
        where = ".".join(loc[:-1])
        model: type[BaseModel] = ModelsConfig
        if len(loc) == 2 and loc[0] in ROLES:
            model = RoleConfig
        elif loc[0] == "prices":
            model = Price
        close = difflib.get_close_matches(loc[-1], [*model.model_fields, "defaults"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key {loc[-1]!r}{f' in {where}' if where else ''}{hint}"
    return f"{'.'.join(loc) or '(top)'}: {error['msg']}"


def load_models_config(path: str | Path) -> ModelsConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ModelsConfigError(f"cannot read models config {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ModelsConfigError(f"{path}: invalid YAML: {exc}") from None
    return parse_models_config(data, str(path))


def check_models_config(
    config: ModelsConfig, roles: Iterable[str], source: str = "the models config"
) -> None:
    """The start-up check of `tbx run` and `tbx env serve`: every role in `roles` is
    configured and has the key its endpoint needs. Raises ModelsConfigError (a usage error)
    naming the first problem, before anything is written."""
    for name in roles:
        cfg = getattr(config, name, None)
        if cfg is None:
            why = " (its tasks have rubrics: add one, or pass --skip-rubrics)" if name == "judge" else ""
            raise ModelsConfigError(f"{source} has no {name!r} role, which this run needs{why}")
        try:
            cfg.resolved_api_key()
        except ModelsConfigError as exc:
            raise ModelsConfigError(f"{source}: role {name!r}: {exc}") from None


def judge_role_from_env(
    model: str | None = None, base_url: str | None = None, environ: dict[str, str] | None = None
) -> RoleConfig:
    """The judge role from TBX_JUDGE_MODEL, TBX_JUDGE_BASE_URL (else OpenAI's) and
    TBX_JUDGE_API_KEY (else OPENAI_API_KEY), for `tbx judge regrade` without a
    config file; `model` / `base_url` override the environment."""
    env = os.environ if environ is None else environ
    model = model or env.get("TBX_JUDGE_MODEL", "")
    if not model:
        raise ModelsConfigError("no judge model: set TBX_JUDGE_MODEL or pass --judge-model")
    key_env = next((k for k in ("TBX_JUDGE_API_KEY", "OPENAI_API_KEY") if env.get(k)), None)
    url = base_url or env.get("TBX_JUDGE_BASE_URL") or OPENAI_URL
    if key_env is None and urlsplit(url).hostname in KEYED_HOSTS:
        raise ModelsConfigError(f"no judge key for {url}: set TBX_JUDGE_API_KEY or OPENAI_API_KEY")
    return RoleConfig(
        model=model,
        base_url=url,
        api_key=SecretStr(env[key_env]) if key_env else None,
    )
