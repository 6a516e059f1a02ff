"""Does a model role's endpoint really serve chat completions? (`/ready`'s `user` and `judge`.)

`GET {base_url}/models` answering 200 with a model list is proof enough and costs
nothing. Many OpenAI-compatible servers do not implement it (404/405/501), and a
server answering 404 for everything, or a vLLM `base_url` without `/v1`, looks the
same from there: so when the list is missing, the cheapest real request
(`POST {base_url}/chat/completions`, `max_tokens: 1`) decides. A success is
remembered for PROVEN_SECONDS so polling `/ready` does not spend tokens.

Every failure names the role, what was tried and what to do; an authentication
failure names where the key comes from (never the key).
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx

from bench.llm.config import ModelsConfigError, RoleConfig

PROVEN_SECONDS = 300.0
NOT_LISTED = (404, 405, 501)  # "no /models route here": try the completions path itself


class Probe:
    def __init__(self, ok: bool, detail: str):
        self.ok, self.detail = ok, detail


def key_source(cfg: RoleConfig) -> str:
    if cfg.api_key_env is not None:
        return f"the environment variable {cfg.api_key_env} (api_key_env)"
    if cfg.api_key is not None:
        return "the config's api_key"
    return "no key configured (set api_key_env or api_key)"


def _address(base_url: str) -> str:
    parts = urlsplit(base_url)
    return parts.netloc or base_url


def _auth_failure(role: str, cfg: RoleConfig, url: str, status: int) -> Probe:
    return Probe(
        False,
        f"{role}: {url} rejects the API key (HTTP {status}, authentication); "
        f"the key comes from {key_source(cfg)}: check it",
    )


def _connect_failure(role: str, cfg: RoleConfig, exc: httpx.HTTPError) -> Probe:
    return Probe(
        False,
        f"{role}: cannot reach {_address(cfg.base_url)} ({exc.__class__.__name__}: {exc}); "
        f"is the model server running at {cfg.base_url}?",
    )


async def _completions(role: str, cfg: RoleConfig, http: httpx.AsyncClient, headers: dict[str, str]) -> Probe:
    url = cfg.base_url.rstrip("/") + "/chat/completions"
    body = {"model": cfg.model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    try:
        r = await http.post(url, headers=headers, json=body)
    except httpx.HTTPError as exc:
        return _connect_failure(role, cfg, exc)
    if r.status_code in (401, 403):
        return _auth_failure(role, cfg, url, r.status_code)
    if r.status_code == 404:
        hint = " (does base_url end with /v1?)" if not cfg.base_url.rstrip("/").endswith("/v1") else ""
        return Probe(False, f"{role}: {url} answers HTTP 404: no chat completions there{hint}; fix base_url")
    if r.status_code >= 400:
        return Probe(
            False, f"{role}: {url} answers HTTP {r.status_code} to a 1-token request: {r.text[:200]!r}"
        )
    try:
        choices = r.json().get("choices")
    except (ValueError, AttributeError):
        choices = None
    if not isinstance(choices, list):
        return Probe(
            False, f"{role}: {url} answers HTTP {r.status_code} but not a chat completion; fix base_url"
        )
    return Probe(True, f"{cfg.model} at {cfg.base_url}: a 1-token completion worked (no /models list)")


async def probe(role: str, cfg: RoleConfig, timeout: float) -> Probe:
    try:
        key = cfg.resolved_api_key()
    except ModelsConfigError as exc:
        return Probe(False, f"{role}: {exc}")
    headers = {"Authorization": f"Bearer {key}"}
    url = cfg.base_url.rstrip("/") + "/models"
    async with httpx.AsyncClient(timeout=timeout) as http:
        try:
            r = await http.get(url, headers=headers)
        except httpx.HTTPError as exc:
            return _connect_failure(role, cfg, exc)
        if r.status_code in (401, 403):
            return _auth_failure(role, cfg, url, r.status_code)
        if r.status_code == 200 and _model_list(r) is not None:
            models = _model_list(r) or []
            if models and cfg.model not in models:
                return Probe(
                    False,
                    f"{role}: {cfg.base_url} does not serve model {cfg.model!r} "
                    f"(it lists {', '.join(models[:5])}); fix the role's model",
                )
            return Probe(True, f"{cfg.model} at {cfg.base_url} is listed by GET /models")
        if r.status_code in NOT_LISTED or r.status_code == 200:
            return await _completions(role, cfg, http, headers)
        return Probe(False, f"{role}: {url} answers HTTP {r.status_code}: {r.text[:200]!r}")


def _model_list(r: httpx.Response) -> list[str] | None:
    try:
        data = r.json().get("data")
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


class ProbeCache:
    """A proven endpoint stays proven for PROVEN_SECONDS; failures are re-tried on every check."""

    def __init__(self) -> None:
        self._proven: dict[tuple[str, str, str], tuple[float, Probe]] = {}

    async def check(self, role: str, cfg: RoleConfig, timeout: float) -> Probe:
        key = (role, cfg.base_url, cfg.model)
        hit = self._proven.get(key)
        if hit is not None and time.monotonic() - hit[0] < PROVEN_SECONDS:
            return hit[1]
        result = await probe(role, cfg, timeout)
        if result.ok:
            self._proven[key] = (time.monotonic(), result)
        else:
            self._proven.pop(key, None)
        return result


__all__ = ["Probe", "ProbeCache", "key_source", "probe"]
