"""Does a model role's endpoint really serve chat completions? (`tbx run`'s start-up
check, `/ready`'s `user` and `judge`.)

`GET {base_url}/models` answering 200 with a list naming the role's model is proof
enough and costs nothing. Many OpenAI-compatible servers do not implement it
(404/405/501), and a server answering 404 for everything, or a vLLM `base_url`
without `/v1`, looks the same from there; a single-model server (llama-cpp-python)
lists its file path, not the configured name: so when the list is missing or does
not name the model, the cheapest real request (`POST {base_url}/chat/completions`,
`max_tokens: 1`) decides; its tokens, as the server counted them, are the probe's
`usage` (`tbx run`'s manifest: `model_servers[role].probe_usage`, on the first role
of those sharing the endpoint). A success is remembered for PROVEN_SECONDS so polling
`/ready` does not spend tokens.

A check waits as long as the role's `timeout` (a request would), and tells a busy
server from a down one: `down` is a refused connection, a name that does not
resolve or no connection within CONNECT_SECONDS; `busy` is a connection accepted
and no answer yet (llama-cpp-python answers `/models` only after the request in
progress). A busy server is never called unreachable.

Every failure names the role, what was tried and what to do; an authentication
failure names where the key comes from (never the key). `server_info` is what the
server said of itself (model ids, owners, its `Server` header) for the manifest.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from bench.llm.config import ModelsConfigError, RoleConfig

PROVEN_SECONDS = 300.0
CONNECT_SECONDS = 10.0  # no connection by then: down (a busy server still accepts one)
NOT_LISTED = (404, 405, 501)  # "no /models route here": try the completions path itself
State = Literal["ok", "busy", "down", "key", "refused"]


class Probe:
    """`state`: ok; busy (connected, no answer within the timeout); down (no connection);
    key (the endpoint refuses the key, or one is needed and missing); refused (anything else)."""

    def __init__(self, ok: bool, detail: str, state: State = "ok", server: dict[str, Any] | None = None):
        self.ok, self.detail, self.state, self.server = ok, detail, state, server
        # the completion request's tokens, when one was answered (None: no tokens were spent
        # or the server reported none); `role`: the role it was made for
        self.usage: dict[str, Any] | None = None
        self.role: str | None = None

    @staticmethod
    def failed(state: State, detail: str) -> Probe:
        return Probe(False, detail, state)


def _address(base_url: str) -> str:
    parts = urlsplit(base_url)
    return parts.netloc or base_url


def _auth_failure(role: str, cfg: RoleConfig, url: str, status: int) -> Probe:
    return Probe.failed(
        "key", f"{role}: {url} answers HTTP {status} (authentication): {cfg.key_hint()}; set or check the key"
    )


def _transport_failure(
    role: str, cfg: RoleConfig, exc: httpx.HTTPError, connected: bool, timeout: float
) -> Probe:
    if connected and isinstance(exc, httpx.TimeoutException):
        return Probe.failed(
            "busy",
            f"{role}: {_address(cfg.base_url)} is busy: it accepted the connection but did not answer "
            f"within {timeout:g} s (the role's timeout); it may be working on another request",
        )
    return Probe.failed(
        "down",
        f"{role}: cannot reach {_address(cfg.base_url)} ({exc.__class__.__name__}: {exc}); "
        f"is the model server running at {cfg.base_url}?",
    )


def server_info(r: httpx.Response) -> dict[str, Any]:
    """What a `GET /models` answer says of the server: its models (id, owned_by) and `Server` header."""
    info: dict[str, Any] = {"models": []}
    try:
        data = r.json().get("data")
    except (ValueError, AttributeError):
        data = None
    for m in data if isinstance(data, list) else []:
        if isinstance(m, dict) and isinstance(m.get("id"), str):
            entry = {"id": m["id"]}
            if isinstance(m.get("owned_by"), str):
                entry["owned_by"] = m["owned_by"]
            info["models"].append(entry)
    if r.headers.get("server"):
        info["server"] = r.headers["server"]
    return info


class _Connection:
    """Whether the request got a connection (httpcore's trace): a timeout after it is `busy`."""

    def __init__(self) -> None:
        self.connected = False

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith("connect_tcp.complete") or event.endswith("connect_unix_socket.complete"):
            self.connected = True


async def _completions(
    role: str, cfg: RoleConfig, http: httpx.AsyncClient, headers: dict[str, str], timeout: float, listed: str
) -> Probe:
    url = cfg.base_url.rstrip("/") + "/chat/completions"
    body = {"model": cfg.model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    conn = _Connection()
    try:
        r = await http.post(url, headers=headers, json=body, extensions={"trace": conn.trace})
    except httpx.HTTPError as exc:
        return _transport_failure(role, cfg, exc, conn.connected, timeout)
    if r.status_code in (401, 403):
        return _auth_failure(role, cfg, url, r.status_code)
    if r.status_code == 404:
        hint = " (does base_url end with /v1?)" if not cfg.base_url.rstrip("/").endswith("/v1") else ""
        what = f"{listed}; " if listed else ""
        return Probe.failed(
            "refused", f"{role}: {what}{url} answers HTTP 404: no chat completions there{hint}; fix base_url"
        )
    if r.status_code >= 400:
        return Probe.failed(
            "refused", f"{role}: {url} answers HTTP {r.status_code} to a 1-token request: {r.text[:200]!r}"
        )
    try:
        reply = r.json()
        choices = reply.get("choices")
    except (ValueError, AttributeError):
        reply, choices = None, None
    spent = _usage(role, reply)
    if not isinstance(choices, list):
        return Probe.failed(
            "refused", f"{role}: {url} answers HTTP {r.status_code} but not a chat completion; fix base_url"
        )
    why = f"{listed}, but" if listed else "no /models list;"
    result = Probe(True, f"{cfg.model} at {cfg.base_url}: {why} a 1-token completion worked")
    result.usage, result.role = spent, role
    return result


def _usage(role: str, reply: Any) -> dict[str, Any] | None:
    """The tokens a completion's `usage` says were spent (the manifest's `probe_usage`)."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return {
        "role": role,
        "calls": 1,
        "input_tokens": usage.get("prompt_tokens") or 0,
        "cached_tokens": cached or 0,
        "output_tokens": usage.get("completion_tokens") or 0,
    }


async def probe(
    role: str, cfg: RoleConfig, timeout: float | None = None, conn: _Connection | None = None
) -> Probe:
    """Check one role's endpoint, waiting up to `timeout` (default: the role's) for an answer;
    `conn` says meanwhile whether it has a connection."""
    wait = cfg.timeout if timeout is None else timeout
    try:
        key = cfg.resolved_api_key()
    except ModelsConfigError as exc:
        return Probe.failed("key", f"{role}: {exc}")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = cfg.base_url.rstrip("/") + "/models"
    conn = conn or _Connection()
    async with httpx.AsyncClient(timeout=httpx.Timeout(wait, connect=min(CONNECT_SECONDS, wait))) as http:
        try:
            r = await http.get(url, headers=headers, extensions={"trace": conn.trace})
        except httpx.HTTPError as exc:
            return _transport_failure(role, cfg, exc, conn.connected, wait)
        if r.status_code in (401, 403):
            return _auth_failure(role, cfg, url, r.status_code)
        info = server_info(r) if r.status_code == 200 else None
        models = [m["id"] for m in info["models"]] if info is not None else []
        if models and cfg.model in models:
            return Probe(True, f"{cfg.model} at {cfg.base_url} is listed by GET /models", server=info)
        if r.status_code in NOT_LISTED or r.status_code == 200:
            listed = f"GET /models lists {', '.join(models[:5])}, not {cfg.model!r}" if models else ""
            result = await _completions(role, cfg, http, headers, wait, listed)
            result.server = info
            return result
        return Probe.failed("refused", f"{role}: {url} answers HTTP {r.status_code}: {r.text[:200]!r}")


class ProbeCache:
    """A proven endpoint stays proven for PROVEN_SECONDS; failures are re-tried on every check.
    A probe runs in the background as long as the role's timeout: a check that does not
    wait for it says what it knows so far (connected: busy, which is not a failure)."""

    def __init__(self) -> None:
        self._proven: dict[tuple[str, str, str], tuple[float, Probe]] = {}
        self._running: dict[tuple[str, str, str], tuple[float, _Connection, asyncio.Task[Probe]]] = {}

    async def check(self, role: str, cfg: RoleConfig, wait: float) -> Probe:
        """The endpoint's state, waiting at most `wait` seconds for a probe in progress."""
        key = (role, cfg.base_url, cfg.model)
        hit = self._proven.get(key)
        if hit is not None and time.monotonic() - hit[0] < PROVEN_SECONDS:
            return hit[1]
        if key not in self._running:
            conn = _Connection()
            self._running[key] = (time.monotonic(), conn, asyncio.create_task(probe(role, cfg, conn=conn)))
        started, conn, task = self._running[key]
        await asyncio.wait({task}, timeout=wait)  # never cancels it: the next check may find it done
        if not task.done():
            elapsed = time.monotonic() - started
            if conn.connected:  # a server is there, working on something else: not a failure
                return Probe(
                    True,
                    f"{cfg.model} at {cfg.base_url}: busy (connected, no answer for {elapsed:.0f} s; "
                    f"waiting up to the role's timeout, {cfg.timeout:g} s)",
                    "busy",
                )
            # neither refused nor connected (yet): unknown, so not ready; the probe goes on
            return Probe.failed(
                "down", f"{role}: connecting to {_address(cfg.base_url)} ({elapsed:.0f} s so far)"
            )
        del self._running[key]
        result = task.result()
        if result.ok:
            self._proven[key] = (time.monotonic(), result)
        else:
            self._proven.pop(key, None)
        return result


def manifest_servers(probes: dict[str, Probe]) -> dict[str, Any]:
    """The manifest's `model_servers`: what each role's server said of itself, and the
    start-up check's tokens (`probe_usage`) on the role whose probe spent them (roles
    sharing an endpoint share one probe: counted once)."""
    out: dict[str, Any] = {}
    for role, p in probes.items():
        entry = dict(p.server) if p.server is not None else {}
        if p.usage is not None and p.role == role:
            entry["probe_usage"] = p.usage
        if entry:
            out[role] = entry
    return out


async def check_roles(roles: dict[str, RoleConfig]) -> dict[str, Probe]:
    """Every role's endpoint probed at once (one probe per distinct endpoint and model)."""

    def same(cfg: RoleConfig) -> tuple[Any, ...]:
        return (cfg.base_url, cfg.model, cfg.api_key_env, cfg.timeout)

    distinct: dict[tuple[Any, ...], asyncio.Task[Probe]] = {}
    for role, cfg in roles.items():
        if same(cfg) not in distinct:
            distinct[same(cfg)] = asyncio.create_task(probe(role, cfg))
    await asyncio.gather(*distinct.values())
    return {role: distinct[same(cfg)].result() for role, cfg in roles.items()}


__all__ = ["Probe", "ProbeCache", "check_roles", "manifest_servers", "probe", "server_info"]
