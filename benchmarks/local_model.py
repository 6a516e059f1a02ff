"""tbx against a real model server (issue 43): llama-cpp-python serving a small GGUF model,
with the agent, the simulated user and the judge all on that one endpoint.

It starts `python -m llama_cpp.server --model M --host 127.0.0.1 --port P --n_ctx 32768
--logits_all false --chat_format chatml-function-calling` with the interpreter given
(`--python` or $TBX_LLAMA_PYTHON; docs/local-model.md says how to install it) and the
model given (`--model` or $TBX_LLAMA_MODEL), puts a recording relay in front of it
(benchmarks/model_relay.py: what crossed, as the server saw it), writes a models config
with the three roles on that endpoint and no key, runs `tbx run --agent llm` on a few
demo-pack tasks (one with rubrics), and prints per attempt: tokens per role, calls, wall,
finish reason, signature, system errors and what the model managed; then the run's
totals against the server's own token counts.

Then the probes: each item of issue 43's list that a real server shows, run as a user
would, printing what the user sees (exit code, the lines printed, what was left in
--out): 1 an unset key and a typo in the config; 2 a busy server during the endpoint
check; 3 tool_choice; 4 content null; 5 usage on system-error rows; 6 finish reasons;
7 judge errors; 8 an empty final message; 9 context overflow (a second server with a
small context) and time spent waiting on the endpoint; 10 the smaller ones.

`--tbx` chooses the tbx that runs (default: this checkout's .venv/bin/tbx), so the same
benchmark shows a branch's "before" and "after":

    TBX_LLAMA_PYTHON=/opt/llama/venv/bin/python TBX_LLAMA_MODEL=~/models/gemma3-270m.gguf \\
        .venv/bin/python benchmarks/local_model.py [--tbx OTHER/.venv/bin/tbx] [--json out.json]

Exit status 0 when the main run finished with a row for every attempt (whatever the
model managed); the probes report, they do not gate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from llama_server import LlamaServer, alias_of  # noqa: E402
from model_relay import Exchange, Relay  # noqa: E402

PACK = REPO / "bench" / "packs" / "demo"
# Two state tasks and the rubric task of the retail domain (one scenario, one tool list).
TASKS = (
    "demo_retail.py:test_ret_expedite_headphones",
    "demo_retail.py:test_ret_change_of_mind_tablet",
)
ROLES = ("agent", "user", "judge")
MODEL_NAME = {r: f"local-{r}" for r in ROLES}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look up an order by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


# ---------------------------------------------------------------- the server


# ---------------------------------------------------------------- config and tbx


def models_config(base_url: str, *, max_tokens: int, **role_extra: Any) -> dict[str, Any]:
    """agent, user and judge on one endpoint, no key (a local server needs none)."""
    roles = {
        "agent": {"model": MODEL_NAME["agent"], "temperature": 0.0, "seed": 1000, "max_tokens": max_tokens},
        "user": {"model": MODEL_NAME["user"], "temperature": 0.0, "max_tokens": 96},
        "judge": {"model": MODEL_NAME["judge"], "temperature": 0.0, "max_tokens": 128},
    }
    return {"defaults": {"base_url": base_url, "timeout": 600, **role_extra}, **roles}


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Tbx:
    """The tbx under test (a path to its executable) and the options every run shares."""

    def __init__(self, exe: str, work: Path, wall_clock: float):
        self.exe, self.work, self.wall_clock = exe, work, wall_clock
        self.golden = work / "golden"

    def run_args(
        self, config: Path, out: Path, tasks: tuple[str, ...], repeat: int, *extra: str
    ) -> list[str]:
        return [
            self.exe,
            "run",
            "--dataset",
            str(PACK),
            "--agent",
            "llm",
            "--config",
            str(config),
            "--tasks",
            ",".join(tasks),
            "--repeat",
            str(repeat),
            "--concurrency",
            "1",
            "--out",
            str(out),
            "--golden-cache",
            str(self.golden),
            "--wall-clock",
            str(self.wall_clock),
            "--plain",
            *extra,
        ]

    def env(self, **changes: str | None) -> dict[str, str]:
        env = dict(os.environ)
        for k, v in changes.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def call(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=timeout)


def until_started(
    argv: list[str], env: dict[str, str], limit: float, relay: Relay | None = None
) -> dict[str, Any]:
    """Run a `tbx run` until it exits or starts its attempts (its "N tasks x" line, then the
    first request through `relay` when given), then stop it with SIGINT; what it printed."""
    t0 = time.monotonic()
    since = time.time()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    started = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if " tasks x " in line:
                started.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    first_request: Exchange | None = None
    while proc.poll() is None and time.monotonic() - t0 < limit:
        if started.is_set() and (relay is None or (first_request := _first(relay, since)) is not None):
            break
        time.sleep(0.5)
    reached = time.monotonic() - t0
    stopped = proc.poll() is None
    if stopped:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    reader.join(5)
    return {
        "exit": proc.returncode,
        "stopped_by_us": stopped,
        "seconds": round(reached, 1),
        "printed": lines,
        "first_request": first_request.model_dump() if first_request else None,
    }


def _first(relay: Relay, since: float) -> Exchange | None:
    chat = [r for r in relay.since(since) if r.path.endswith("/chat/completions")]
    return chat[0] if chat else None


def listing(out: Path) -> list[str]:
    if not out.exists():
        return ["(no output directory)"]
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) or ["(empty)"]


# ---------------------------------------------------------------- reading a run


def jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def latest_rows(out: Path) -> list[dict[str, Any]]:
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for r in jsonl(out / "results.jsonl"):
        rows[(r["task_id"], r["repeat"])] = r
    return list(rows.values())


def trajectory_of(out: Path, row: dict[str, Any]) -> dict[str, Any] | None:
    rel = row.get("trajectory")
    return read_json(out / rel) if rel else None


def record_of(out: Path, row: dict[str, Any]) -> dict[str, Any] | None:
    rel = row.get("attempt_file") or (f"attempts/{row['attempt_id']}.json" if row.get("attempt_id") else None)
    return read_json(out / rel) if rel else None


def usage_text(usage: dict[str, Any]) -> str:
    if not usage:
        return "{} (nothing recorded)"
    parts = []
    for role, u in sorted(usage.items()):
        if isinstance(u, dict):
            parts.append(
                f"{role} {u.get('calls', 0)} calls {u.get('input_tokens', 0)}/{u.get('output_tokens', 0)} tok"
            )
        else:
            parts.append(f"{role} {u}")
    return ", ".join(parts)


def final_text(traj: dict[str, Any] | None) -> str:
    if traj is None:
        return ""
    for m in reversed(traj.get("messages") or []):
        if m.get("role") == "assistant" and not m.get("tool_calls"):
            return str(m.get("content") or "")
    return ""


BASE_ROW_KEYS = {
    "task_id",
    "repeat",
    "domain",
    "passed",
    "system_error",
    "signature",
    "finish_reason",
    "usage",
    "timings",
    "attempt_id",
    "attempt_file",
    "trajectory",
    "error",
    "run_id",
    "cost_usd",
}


def attempt_summary(out: Path, row: dict[str, Any]) -> dict[str, Any]:
    traj = trajectory_of(out, row)
    record = record_of(out, row) or {}
    calls = (traj or {}).get("tool_calls") or []
    timings = row.get("timings") or {}
    rubric = (record.get("verdict") or {}).get("rubric") or record.get("rubric") or None
    return {
        "task": row["task_id"].split(":")[-1],
        "repeat": row["repeat"],
        "outcome": "system error" if row.get("system_error") else ("pass" if row.get("passed") else "fail"),
        "signature": row.get("signature"),
        "finish_reason": row.get("finish_reason"),
        "row_usage": row.get("usage") or {},
        "trajectory_usage": (traj or {}).get("usage") or {},
        # model_wait (where a tbx records it) is part of `agent`, not beside it
        "wall_s": round(
            sum(v for k, v in timings.items() if isinstance(v, int | float) and k != "model_wait"), 1
        ),
        "agent_s": round(float(timings.get("agent", 0.0)), 1),
        "model_wait_s": timings.get("model_wait"),
        "tool_calls": [f"{c.get('tool')}{'!' if c.get('is_error') else ''}" for c in calls],
        "agent_turns": (traj or {}).get("agent_turns")
        or len([m for m in (traj or {}).get("messages") or [] if m.get("role") == "assistant"]),
        "final": final_text(traj)[:160],
        "error": (row.get("error") or "")[:400],
        "rubric": rubric,
        "new_row_fields": sorted(set(row) - BASE_ROW_KEYS),
    }


def relay_totals(records: list[Exchange]) -> dict[str, Any]:
    chat = [r for r in records if r.path.endswith("/chat/completions")]
    by_role: dict[str, dict[str, Any]] = {}
    for r in chat:
        role = (r.role or "?").removeprefix("local-")
        d = by_role.setdefault(
            role,
            {
                "requests": 0,
                "ok": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "seconds": 0.0,
                "statuses": Counter(),
            },
        )
        d["requests"] += 1
        d["seconds"] += r.seconds
        d["statuses"][str(r.status)] += 1
        if r.status == 200:
            d["ok"] += 1
            d["prompt_tokens"] += int(r.usage.get("prompt_tokens") or 0)
            d["completion_tokens"] += int(r.usage.get("completion_tokens") or 0)
    for d in by_role.values():
        d["statuses"] = dict(d["statuses"])
        d["seconds"] = round(d["seconds"], 1)
    errors = Counter((r.status, (r.error or "")[:160]) for r in chat if r.status != 200)
    with_tools = [r for r in chat if r.tools]
    return {
        "by_role": by_role,
        "errors": [{"status": s, "body": b, "times": n} for (s, b), n in errors.most_common(5)],
        "with_tools": len(with_tools),
        "tool_choice_sent": Counter(json.dumps(r.tool_choice) for r in with_tools),
        "null_content_requests": sum(1 for r in chat if r.null_content),
        "null_content_statuses": dict(Counter(str(r.status) for r in chat if r.null_content)),
        "authorization_header": dict(Counter(str(r.authorization) for r in chat)),
        "system_messages_in_agent_requests": dict(
            Counter(r.system_messages for r in chat if r.role == MODEL_NAME["agent"])
        ),
        "agent_prompt_tokens_max": max(
            (int(r.usage.get("prompt_tokens") or 0) for r in chat if r.role == MODEL_NAME["agent"]), default=0
        ),
        "finish_reasons": dict(Counter(str(r.finish_reason) for r in chat if r.status == 200)),
        "replies_with_tool_calls": sum(1 for r in chat if r.tool_calls),
        "identical_judge_reasks": _reasks([r for r in chat if r.role == MODEL_NAME["judge"]]),
    }


def _reasks(judge: list[Exchange]) -> int:
    seen = Counter(r.body_sha for r in judge if r.body_sha)
    return sum(n - 1 for n in seen.values() if n > 1)


# ---------------------------------------------------------------- the probes (issue 43's list)


def probe_key_and_typo(tbx: Tbx, relay: Relay, work: Path) -> dict[str, Any]:
    """1: `api_key_env: TBX_MODEL_API_KEY` left unset; a typo (`max_token`) in the config."""
    out: dict[str, Any] = {"server_idle_after_s": wait_idle(relay.base_url.removesuffix("/v1"))}
    keyed = models_config(relay.base_url, max_tokens=64, api_key_env="TBX_MODEL_API_KEY")
    cfg = write_yaml(work / "keyed.yaml", keyed)
    dest = work / "p1-key"
    res = until_started(tbx.run_args(cfg, dest, TASKS[:1], 1), tbx.env(TBX_MODEL_API_KEY=None), 300, relay)
    out["unset_key"] = {**res, "printed": res["printed"][-8:], "left_in_out": listing(dest)[:12]}
    typo = models_config(relay.base_url, max_tokens=64)
    typo["agent"]["max_token"] = typo["agent"].pop("max_tokens")
    cfg = write_yaml(work / "typo.yaml", typo)
    wait_idle(relay.base_url.removesuffix("/v1"))
    dest = work / "p1-typo"
    res = until_started(tbx.run_args(cfg, dest, TASKS[:1], 1), tbx.env(), 300, relay)
    out["typo"] = {**res, "printed": res["printed"][-8:], "left_in_out": listing(dest)[:12]}
    return out


def wait_idle(server_url: str) -> float:
    """Seconds until the server answers `GET /v1/models` (it does so between requests only)."""
    t0 = time.monotonic()
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(server_url + "/v1/models", timeout=900)
    return round(time.monotonic() - t0, 1)


# A long prompt: the server answers nothing else while it evaluates one (a v1.0 domain's
# first agent request is 19-26 k tokens; this is ~3 k).
BUSY_PROMPT = "Summarise this log in one line.\n" + "\n".join(
    f"{i:05d} INFO worker-{i % 7} processed order ORD-{30000000 + i} in {i % 97} ms" for i in range(160)
)


def _busy(server_url: str, alias: str, tokens: int) -> threading.Thread:
    def work() -> None:
        body = {
            "model": alias,
            # a fresh first line each time: the server's prompt cache would answer a repeat at once
            "messages": [{"role": "user", "content": f"Request {time.time_ns()}.\n{BUSY_PROMPT}"}],
            "max_tokens": tokens,
            "temperature": 0.7,
        }
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(server_url + "/v1/chat/completions", json=body, timeout=900)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t


def probe_busy(tbx: Tbx, relay: Relay, server_url: str, alias: str, work: Path) -> dict[str, Any]:
    """2: the server works on a request while `tbx run` checks the endpoint."""
    cfg = write_yaml(work / "busy.yaml", models_config(relay.base_url, max_tokens=64))
    wait_idle(server_url)
    busy = _busy(server_url, alias, 32)
    time.sleep(2)
    t0 = time.monotonic()
    code: int | str
    try:
        code = httpx.get(server_url + "/v1/models", timeout=600).status_code
    except httpx.HTTPError as exc:
        code = repr(exc)
    models_wait = round(time.monotonic() - t0, 1)
    busy.join()
    busy = _busy(server_url, alias, 32)
    time.sleep(2)
    dest = work / "p2-busy"
    res = until_started(tbx.run_args(cfg, dest, TASKS[:1], 1), tbx.env(), 600)
    busy.join()
    return {
        "get_models_while_busy": {"status": code, "seconds": models_wait},
        "tbx_run": {**res, "printed": res["printed"][-6:]},
    }


def _chat(server_url: str, body: dict[str, Any]) -> dict[str, Any]:
    t0 = time.monotonic()
    resp = httpx.post(server_url + "/v1/chat/completions", json=body, timeout=600)
    out: dict[str, Any] = {"status": resp.status_code, "seconds": round(time.monotonic() - t0, 1)}
    if resp.status_code == 200:
        choice = resp.json()["choices"][0]
        out["finish_reason"] = choice.get("finish_reason")
        out["tool_calls"] = [c["function"]["name"] for c in choice["message"].get("tool_calls") or []]
        out["content"] = (choice["message"].get("content") or "")[:120]
    else:
        out["body"] = resp.text[:300]
        out["says_valid_string"] = "Input should be a valid string" in resp.text
    return out


def probe_server_contract(server_url: str, alias: str) -> dict[str, Any]:
    """3 and 4, asked of the server directly: tools without and with tool_choice; an assistant
    message with tool calls and content null, then with content ""."""
    ask = [
        {"role": "system", "content": "You are a support agent. Use the tools."},
        {"role": "user", "content": "What is the status of order ORD-30000011? Look it up."},
    ]
    base = {"model": alias, "messages": ask, "tools": [TOOL], "max_tokens": 96, "temperature": 0.0}
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_order", "arguments": '{"order_id": "ORD-30000011"}'},
    }
    after: list[dict[str, Any]] = [
        *ask,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "processing"}'},
    ]
    return {
        "tools_without_tool_choice": _chat(server_url, base),
        "tools_with_tool_choice_auto": _chat(server_url, {**base, "tool_choice": "auto"}),
        "assistant_content_null": _chat(server_url, {**base, "messages": after, "tool_choice": "auto"}),
        "assistant_content_empty": _chat(
            server_url,
            {**base, "messages": [*after[:2], {**after[2], "content": ""}, after[3]], "tool_choice": "auto"},
        ),
    }


def probe_overflow(tbx: Tbx, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """9: a second server with a small context: the agent's first request does not fit."""
    small = LlamaServer(args.python, args.model, args.small_ctx, work / "server-small.log")
    try:
        small.start()
        relay = Relay(small.url).start()
        try:
            cfg = write_yaml(work / "small.yaml", models_config(relay.base_url, max_tokens=64))
            dest = work / "p9-overflow"
            t0 = time.monotonic()
            proc = subprocess.run(
                tbx.run_args(cfg, dest, TASKS[:1], 1), capture_output=True, text=True, timeout=1800
            )
            rows = latest_rows(dest)
            errors = jsonl(dest / "errors.jsonl")
            return {
                "n_ctx": args.small_ctx,
                "exit": proc.returncode,
                "seconds": round(time.monotonic() - t0, 1),
                "printed": proc.stderr.splitlines()[-4:],
                "rows": [attempt_summary(dest, r) for r in rows],
                "errors_jsonl": [
                    {k: e.get(k) for k in ("phase", "cause", "error", "message") if k in e}
                    | {"has_timings": "timings" in e}
                    for e in errors
                ][:4],
                "server": relay_totals(relay.records),
                "from_run": probe_from_run(dest, tbx, relay.records),
            }
        finally:
            relay.close()
    finally:
        small.stop()


def probe_from_run(out: Path, tbx: Tbx, records: list[Exchange]) -> dict[str, Any]:
    """5-8 and 10, read from the main run: rows, trajectories, records, report, view."""
    rows = latest_rows(out)
    all_rows = jsonl(out / "results.jsonl")
    errors = jsonl(out / "errors.jsonl")
    manifest = read_json(out / "manifest.json") or {}
    found: dict[str, Any] = {}
    sys_rows = [r for r in all_rows if r.get("system_error")]
    found["5_system_error_rows"] = [
        {
            "task": r["task_id"].split(":")[-1],
            "repeat": r["repeat"],
            "row_usage": usage_text(r.get("usage") or {}),
            "trajectory_usage": usage_text((trajectory_of(out, r) or {}).get("usage") or {}),
            "new_fields": {k: r[k] for k in sorted(set(r) - BASE_ROW_KEYS)},
        }
        for r in sys_rows
    ]
    report = tbx.call("report", str(out), "--json")
    found["report_json"] = (
        _report_figures(report.stdout)
        if report.returncode == 0
        else {"exit": report.returncode, "stderr": report.stderr[-300:]}
    )
    text = tbx.call("report", str(out))
    found["report_lines"] = [
        ln
        for ln in text.stdout.splitlines()
        if any(w in ln.lower() for w in ("token", "judge", "system error", "cost", "$"))
    ][:14]
    found["6_finish_reasons"] = dict(
        Counter(
            f"{'system error' if r.get('system_error') else 'scored'}: {r.get('finish_reason')}"
            for r in all_rows
        )
    )
    found["6_view"] = _view_boxes(tbx, out, sys_rows)
    judged = []
    for r in rows:
        rec = record_of(out, r) or {}
        verdict = rec.get("verdict") or {}
        if rec.get("rubric") or verdict.get("rubric") or verdict.get("rubrics"):
            judged.append(
                {
                    "task": r["task_id"].split(":")[-1],
                    "final_empty": not final_text(trajectory_of(out, r)).strip(),
                    "rubric": verdict.get("rubric") or verdict.get("rubrics") or rec.get("rubric"),
                }
            )
    found["7_8_rubric_attempts"] = judged
    judge = [x for x in records if x.role == MODEL_NAME["judge"]]
    found["7_8_judge_requests"] = {
        "requests": len(judge),
        "identical_reasks": _reasks(judge),
        "temperatures": sorted({str(x.temperature) for x in judge}),
        "seeds": sorted({str(x.seed) for x in judge}),
    }
    trajs = [t for r in all_rows if (t := trajectory_of(out, r))]
    found["10_at_at"] = sum(
        1 for t in trajs for c in t.get("tool_calls") or [] if "at at position" in str(c.get("result"))
    )
    found["10_placeholder_user_turns"] = sum(
        1 for t in trajs for u in t.get("user_turns") or [] if u.get("text") == "I don't know."
    )
    found["10_errors_without_timings"] = sum(1 for e in errors if "timings" not in e)
    found["10_run_name"] = manifest.get("run_name")
    found["10_manifest_keys"] = sorted(manifest)
    return found


def _report_figures(stdout: str) -> dict[str, Any]:
    data = json.loads(stdout)
    keep = {}
    for k, v in data.items():
        if any(
            w in k for w in ("token", "cost", "usage", "judge", "system_error", "pass_at_1", "spent", "error")
        ):
            keep[k] = v
    return keep


def _view_boxes(tbx: Tbx, out: Path, sys_rows: list[dict[str, Any]]) -> dict[str, Any]:
    dest = out / "view-probe"
    res = tbx.call("view", str(out), "--out", str(dest))
    if res.returncode != 0:
        return {"exit": res.returncode, "stderr": res.stderr[-200:]}
    pages = list(dest.rglob("*.html"))
    boxes: Counter[str] = Counter()
    for p in pages:
        html = p.read_text(errors="replace")
        # the conversation's error box: <div class="msg error-box" ...><div class="who">LABEL</div>
        for label in re.findall(r'class="msg error-box"[^>]*><div class="who">([^<]*)</div>', html):
            boxes[label] += 1
    return {"pages": len(pages), "error_boxes": dict(boxes), "system_error_rows": len(sys_rows)}


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--python",
        default=os.environ.get("TBX_LLAMA_PYTHON"),
        help="interpreter with llama-cpp-python[server] ($TBX_LLAMA_PYTHON)",
    )
    p.add_argument(
        "--model", default=os.environ.get("TBX_LLAMA_MODEL"), help="the GGUF model file ($TBX_LLAMA_MODEL)"
    )
    p.add_argument("--tbx", default=str(REPO / ".venv" / "bin" / "tbx"), help="the tbx executable under test")
    p.add_argument("--tasks", default=",".join(TASKS), help="demo-pack task ids of the main run")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--n-ctx", type=int, default=32768)
    p.add_argument(
        "--small-ctx",
        type=int,
        default=1000,
        help="context of the overflow probe's server (a demo retail request is ~1 k tokens: it overflows a few turns in)",
    )
    p.add_argument("--max-tokens", type=int, default=200, help="the agent role's max_tokens")
    p.add_argument("--wall-clock", type=float, default=240, help="tbx run --wall-clock (s per attempt)")
    p.add_argument("--max-retries", type=int, default=2, help="tbx run --max-retries of the main run")
    p.add_argument(
        "--probes", default="1,2,3,9", help="probes run beside the main run (5-8 and 10 always read it)"
    )
    p.add_argument("--skip-run", action="store_true", help="the probes only")
    p.add_argument("--work", help="working directory (default: a new temporary one, kept)")
    p.add_argument("--json", help="write everything measured here")
    args = p.parse_args()
    if not args.python or not args.model:
        p.error("give --python and --model (or $TBX_LLAMA_PYTHON and $TBX_LLAMA_MODEL); docs/local-model.md")
    if not Path(args.model).is_file():
        p.error(f"--model {args.model}: no such file (docs/local-model.md: how to write it)")
    if shutil.which(args.tbx) is None:
        p.error(f"--tbx {args.tbx}: not an executable")
    return args


def show(title: str, value: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(value, indent=2, default=str) if not isinstance(value, str) else value)


@contextlib.contextmanager
def serving(args: argparse.Namespace, work: Path) -> Iterator[tuple[LlamaServer, Relay, str]]:
    server = LlamaServer(args.python, args.model, args.n_ctx, work / "server.log").start()
    try:
        alias = alias_of(server.url)
        relay = Relay(server.url).start()
        try:
            yield server, relay, alias
        finally:
            relay.close()
    finally:
        server.stop()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM too: the servers are stopped on the way out


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="tbx-local-model-"))
    work.mkdir(parents=True, exist_ok=True)
    tbx = Tbx(args.tbx, work, args.wall_clock)
    probes = set(filter(None, args.probes.split(",")))
    tasks = tuple(filter(None, args.tasks.split(",")))
    result: dict[str, Any] = {
        "tbx": args.tbx,
        "tbx_version": tbx.call("--version").stdout.strip(),
        "model": Path(args.model).name,
        "machine": {"cores": os.cpu_count(), "load_before": [round(x, 2) for x in os.getloadavg()]},
        "work": str(work),
    }
    print(f"tbx {result['tbx_version']} ({args.tbx}); model {result['model']}; work {work}", flush=True)
    code = 0
    with serving(args, work) as (server, relay, alias):
        result["server"] = {
            "alias": alias,
            "started_in_s": round(server.started_in, 1),
            "command": " ".join(server.command()),
        }
        print(f"server {alias} up in {server.started_in:.0f} s", flush=True)
        if "3" in probes:
            result["3_4_server_contract"] = probe_server_contract(server.url, alias)
            show("3/4 the server itself: tool_choice, content null", result["3_4_server_contract"])
        if not args.skip_run:
            wait_idle(server.url)
            cfg = write_yaml(work / "models.yaml", models_config(relay.base_url, max_tokens=args.max_tokens))
            out = work / "run"
            t0 = time.monotonic()
            since = time.time()
            proc = subprocess.run(
                tbx.run_args(cfg, out, tasks, args.repeat, "--max-retries", str(args.max_retries)),
                capture_output=True,
                text=True,
                timeout=6 * 3600,
            )
            records = relay.since(since)
            rows = latest_rows(out)
            result["run"] = {
                "exit": proc.returncode,
                "wall_s": round(time.monotonic() - t0, 1),
                "printed": [ln for ln in proc.stderr.splitlines() if not ln.startswith("  ")][-12:],
                "attempts": [attempt_summary(out, r) for r in rows],
                "rows_written": len(jsonl(out / "results.jsonl")),
                "server": relay_totals(records),
            }
            show("main run: tbx run --agent llm", result["run"])
            result["from_run"] = probe_from_run(out, tbx, records)
            show("5-8, 10 as the run recorded them", result["from_run"])
            code = 0 if len(rows) == len(tasks) * args.repeat else 1
        if "1" in probes:
            result["1_key_and_typo"] = probe_key_and_typo(tbx, relay, work)
            show("1 unset key, typo in the config", result["1_key_and_typo"])
        if "2" in probes:
            result["2_busy"] = probe_busy(tbx, relay, server.url, alias, work)
            show("2 a busy server during the endpoint check", result["2_busy"])
    if "9" in probes:
        result["9_overflow"] = probe_overflow(tbx, args, work)
        show("9 context overflow", result["9_overflow"])
    result["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(
        f"\nload {result['machine']['load_before'][0]} -> {result['machine']['load_after'][0]} on {os.cpu_count()} cores; work {work}"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
