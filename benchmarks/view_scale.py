"""`tbx view` at full-run scale: generate an output directory the size of a
k=20 ThinkingBox-Bench run (507 tasks × 20 repeats = 10 140 attempts), then time

* `tbx view` (the whole site: every attempt page, every task page, the tasks page),
  as a subprocess, like a user runs it;
* the tasks page in headless Chromium: wall time of `chromium --dump-dom`
  against a blank page's (the browser's own start-up), and the page's own
  figure (navigation start to the load event, by which the rows are in the DOM:
  `performance.now()`), and the same figures for a blank page;
* the same for a filtered tasks page and for one attempt page;
* `tbx view` again with nothing changed, and as baselines in the same run
  `tbx report` on the same directory and `tbx --help`.

The generated directory has the real formats (results.jsonl rows, AttemptRecords
with verdicts, labelled differences and effects, trajectories, gzip terminal
states), written through the same pydantic models the runner uses, with sizes
of a model run: ~12 tool calls of ~1 KB replies per attempt, 1–6 differences
on failed attempts, a 300-row table in every terminal state.

Usage::

    python benchmarks/view_scale.py [--tasks 507] [--repeats 20] [--dir DIR] [--keep]
    python benchmarks/view_scale.py --generate-only --dir DIR
    python benchmarks/view_scale.py --reuse --dir DIR       # measure a directory generated before
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.rollout.trajectory import Message, ToolCall, Trajectory, UserTurn
from bench.run.results import ResultRow, RoleUsage
from judge import (
    AttemptRecord,
    Difference,
    Effects,
    RowEffect,
    TableEffects,
    Verdict,
    canonical_bytes,
    write_attempt,
)
from servers.registry import load_domain

DOMAINS = ("retail", "auto_insurance", "consulting", "travel", "neobank")
SIGNATURES = ("wrong_state_update", "incomplete_resolution", "tool_use", "no_state_change")
ROWS_PER_STATE = 300
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")

PROBE = """<script>
window.addEventListener('load', function () {
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({ms: performance.now(), rows: document.querySelectorAll('#tasks tbody tr').length,
    marks: document.querySelectorAll('.marks a').length});
  document.body.appendChild(pre);
});
</script>"""


def _table(domain: str) -> tuple[str, list[str]]:
    tables = [t for t in load_domain(domain).tables if t.key_fields == ("id",)]
    spec = next((t for t in tables if t.name == "zendesk_tickets"), tables[0])
    return spec.name, list(spec.field_names)


def _row(fields: list[str], i: int) -> dict[str, Any]:
    return {f: (str(i) if f == "id" else f"{f}-value-{i % 17}") for f in fields}


def _trajectory(task_id: str, table: str, fields: list[str], failing: bool) -> Trajectory:
    calls = [
        ToolCall(
            index=i,
            call_id=f"call_{i}",
            tool=f"{table}_tool_{i % 5}",
            arguments={"id": str(i), "note": "x" * 40},
            result=json.dumps({"item": _row(fields, i)}),
            is_error=failing and i == 3,
            latency_ms=12.0,
            agent_turn=i,
        )
        for i in range(12)
    ]
    messages = [Message(role="user", content="Please help me with my request " * 3)]
    for c in calls:
        call = {
            "id": c.call_id,
            "type": "function",
            "function": {"name": c.tool, "arguments": json.dumps(c.arguments)},
        }
        messages.append(Message(role="assistant", tool_calls=[call]))
        messages.append(Message(role="tool", tool_call_id=c.call_id, name=c.tool, content=c.result))
    messages.append(Message(role="assistant", content="Done. <DONE>"))
    return Trajectory(
        task_id=task_id,
        agent="llm",
        finish_reason="done",
        messages=messages,
        tool_calls=calls,
        user_turns=[UserTurn(index=0, source="query", text=messages[0].content or "")],
        final_message="Done.",
        agent_turns=13,
    )


def generate(out: Path, tasks: int, repeats: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    for sub in ("attempts", "states", "trajectories"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    tables = {d: _table(d) for d in DOMAINS}
    rows: list[str] = []
    for t in range(tasks):
        domain = DOMAINS[t % len(DOMAINS)]
        task_id = f"scale_{domain}.py:test_case_{t:04d}"
        table, fields = tables[domain]
        skill = rng.random()  # this task's pass probability
        base_state = {table: [_row(fields, i) for i in range(ROWS_PER_STATE)]}
        state_bytes = gzip.compress(canonical_bytes(base_state), mtime=0)
        traj_json = {
            failing: _trajectory(task_id, table, fields, failing).model_dump_json()
            for failing in (False, True)
        }
        for r in range(repeats):
            attempt_id = f"t{t:04d}-r{r}-{rng.getrandbits(40):010x}"
            system_error = rng.random() < 0.005
            passed = not system_error and rng.random() < skill
            (out / "trajectories" / f"{attempt_id}.json").write_text(traj_json[not passed])
            differences: list[Difference] = []
            signature = None
            if not passed and not system_error:
                signature = rng.choice(SIGNATURES)
                for k in range(rng.randint(1, 6)):
                    key = str(rng.randrange(ROWS_PER_STATE))
                    if k % 3 == 2:
                        differences.append(
                            Difference(
                                kind="missing_effect",
                                op="insert",
                                table=table,
                                key=f"n{k}",
                                expected=_row(fields, 1000 + k),
                            )
                        )
                    else:
                        field = fields[1 + k % (len(fields) - 1)]
                        differences.append(
                            Difference(
                                kind="wrong_value",
                                table=table,
                                key=key,
                                field=field,
                                expected="golden",
                                actual="agent",
                            )
                        )
            state_rel = f"states/{attempt_id}.terminal.json.gz"
            (out / state_rel).write_bytes(state_bytes)
            effects = Effects(
                tables={
                    table: TableEffects(
                        updated=[RowEffect(key="1", before={"status": "open"}, after={"status": "solved"})]
                    )
                }
            )
            verdict = None
            if not system_error:
                verdict = Verdict(
                    task_id=task_id,
                    passed=passed,
                    strict=passed,
                    terminal_hash="a" * 64,
                    golden_hash=("a" if passed else "b") * 64,
                    initial_hash="c" * 64,
                    differences=differences,
                    effects=effects,
                    signature=signature,  # type: ignore[arg-type]
                )
            record = AttemptRecord(
                task_id=task_id,
                attempt_id=attempt_id,
                run_id="run-scale",
                repeat=r,
                domain=domain,
                terminal_state_path=None if system_error else "../" + state_rel,
                trajectory=[],
                final_message="Done.",
                system_error="RuntimeError: container died" if system_error else None,
                verdict=verdict,
            )
            write_attempt(out / "attempts" / f"{attempt_id}.json", record)
            row = ResultRow.model_validate(
                {
                    "task_id": task_id,
                    "repeat": r,
                    "domain": domain,
                    "passed": passed,
                    "system_error": system_error,
                    "error": "RuntimeError: container died" if system_error else None,
                    "signature": signature,
                    "finish_reason": "done",
                    "usage": {
                        "agent": RoleUsage(model="m", input_tokens=30000, output_tokens=900, cost_usd=0.02)
                    },
                    "timings": {"sandbox_start": 2.0, "agent": 40.0, "judge": 0.2},
                    "attempt_id": attempt_id,
                    "attempt_file": f"attempts/{attempt_id}.json",
                    "trajectory": f"trajectories/{attempt_id}.json",
                }
            )
            rows.append(row.to_json_line())
    (out / "results.jsonl").write_text("".join(rows))
    (out / "manifest.json").write_text(json.dumps({"run_name": "scale", "agent": "llm", "repeats": repeats}))
    return tasks * repeats


def chromium() -> str:
    found = os.environ.get("TBX_CHROMIUM") or next(filter(None, map(shutil.which, CHROMIUM)), None)
    if not found:
        raise SystemExit("no chromium found (apt-get install chromium, or set $TBX_CHROMIUM)")
    return found


def dump(binary: str, profile: Path, url: str) -> tuple[float, str]:
    t = time.monotonic()
    proc = subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return time.monotonic() - t, proc.stdout


def probe(binary: str, profile: Path, page: Path, fragment: str = "") -> dict[str, Any]:
    probed = page.with_name(f".probe-{page.name}")
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    wall, dom = dump(binary, profile, probed.as_uri() + fragment)
    probed.unlink()
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    data = json.loads(html.unescape(m.group(1))) if m else {}
    data["wall_s"] = wall
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=507)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--dir", help="where to generate (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the generated directory")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="measure DIR as generated before (no generation)")
    args = ap.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tbx-view-scale-"))
    run = root / "run"
    try:
        t = time.monotonic()
        if args.reuse:
            n = sum(1 for line in (run / "results.jsonl").open() if line.strip())
            shutil.rmtree(run / "view", ignore_errors=True)
        else:
            n = generate(run, args.tasks, args.repeats)
            print(f"generated {n} attempts in {time.monotonic() - t:.1f} s: {run}")
        if args.generate_only:
            return 0
        tbx = Path(sys.executable).with_name("tbx")
        t = time.monotonic()
        proc = subprocess.run([str(tbx), "view", str(run)], capture_output=True, text=True)
        view_s = time.monotonic() - t
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        print(proc.stdout.strip())
        site = run / "view"
        size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        data = (site / "data" / "tasks.js").stat().st_size
        print(
            f"tbx view: {view_s:.1f} s wall for {n} attempts ({view_s / n * 1000:.2f} ms per attempt); site {size / 2**20:.0f} MiB, data/tasks.js {data / 2**10:.0f} KiB"
        )
        t = time.monotonic()
        again = subprocess.run([str(tbx), "view", str(run)], capture_output=True, text=True)
        print(f"tbx view again, nothing changed: {time.monotonic() - t:.1f} s wall ({again.stdout.strip()})")
        t = time.monotonic()
        subprocess.run([str(tbx), "report", str(run)], capture_output=True, text=True)
        print(f"baseline, tbx report on the same run: {time.monotonic() - t:.1f} s wall")
        t = time.monotonic()
        subprocess.run([str(tbx), "--help"], capture_output=True, text=True)
        print(f"baseline, tbx --help (interpreter start and imports): {time.monotonic() - t:.1f} s wall")
        binary = chromium()
        profile = root / "profile"
        blank = root / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        blank_s = min(dump(binary, profile, blank.as_uri())[0] for _ in range(3))
        blank_ms = min(probe(binary, profile, blank).get("ms", float("nan")) for _ in range(3))
        print(
            f"chromium --dump-dom of a blank page: {blank_s:.2f} s wall, in-page {blank_ms:.0f} ms (best of 3)"
        )
        for name, page, frag in (
            ("tasks page", site / "index.html", ""),
            ("tasks page, filtered (signature, flaky)", site / "index.html", "#sig=tool_use&status=flaky"),
            ("tasks page, sorted by pass rate, page 3", site / "index.html", "#sort=-rate&page=3"),
        ):
            best = min((probe(binary, profile, page, frag) for _ in range(3)), key=lambda d: d["wall_s"])
            print(
                f"{name}: {best['wall_s']:.2f} s wall (blank {blank_s:.2f} s), in-page {best.get('ms', float('nan')):.0f} ms "
                f"to load, {best.get('rows')} rows / {best.get('marks')} marks in the DOM"
            )
        attempt = next((site / "attempts" / "r0").glob("*.html"))
        wall = min(dump(binary, profile, attempt.as_uri())[0] for _ in range(3))
        print(
            f"one attempt page: {wall:.2f} s wall (blank {blank_s:.2f} s), {attempt.stat().st_size / 1024:.0f} KiB"
        )
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
