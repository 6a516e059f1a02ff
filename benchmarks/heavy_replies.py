"""A few calls that read back megabytes, through `tbx env serve` (issue 38, finding 4): what
the episode writes to `--out` and what the server holds while and after it runs.

    python benchmarks/heavy_replies.py [--tickets 280] [--reads 28] [--episodes 2] [--json]

One WebSocket episode on the demo pack's retail task (benchmarks/trainer_clients.EnvClient):
reset → `--tickets` × `zendesk_create_item` with a description just under the tool proxy's
per-call argument cap (`--description-bytes`; so every one is stored: ~17.6 MB of tickets
at 280), up to 20 per step (fewer when they would pass 8 MiB a WebSocket frame) →
`--reads` × `zendesk_get_items` with `$top` 1000, 7 per step (each reply is every ticket)
→ a message the stub user answers by closing the chat (terminal). Repeated `--episodes`
times, one after another.

The review measured, before the per-call caps: one such 28-read episode wrote a 369 MB
trajectory and a 184 MB attempt record and grew env serve from 176 to 730 MB RSS, which
stayed after the episode. Printed: RSS of the server's process tree at rest, after the
creates, after the reads and 20 s after each episode ended; the largest reply the client
saw; the largest trajectory, attempt record and state file in `--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server_probe as probe
from trainer_clients import EnvClient, Tries
from trainer_servers import demo_tasks, start_env_serve

from sandbox import MAX_ARGUMENT_BYTES

UNDER_THE_CAP = MAX_ARGUMENT_BYTES - 1024
PER_STEP = 20
FRAME_BUDGET = 8 * 2**20
READS_PER_STEP = 7


def _rss(pid: int) -> float:
    return float(probe.tree_figures(pid)["rss_mib"])


def _ticket(i: int, size: int) -> dict[str, Any]:
    return {"subject": f"load {i}", "description": "d" * size, "status": "open"}


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def one_episode(
    url: str, task_id: str, pid: int, tickets: int, reads: int, size: int
) -> dict[str, Any]:
    rec: dict[str, Any] = {}
    async with EnvClient(url) as env:
        await env.reset({"test_uid": task_id}, Tries())
        # in batches (`parallel_tool_calls`), so the episode stays within the task's step limit
        per_step = max(1, min(PER_STEP, FRAME_BUDGET // size))  # the server takes 16 MiB frames
        for start in range(0, tickets, per_step):
            batch = [
                _call("zendesk_create_item", {"table": "tickets", "item": _ticket(i, size)})
                for i in range(start, min(tickets, start + per_step))
            ]
            await env.step({"type": "call_tool", "parallel_tool_calls": batch})
        rec["rss_after_creates"] = _rss(pid)
        largest = 0
        t = time.monotonic()
        for start in range(0, reads, READS_PER_STEP):
            batch = [
                _call("zendesk_get_items", {"table": "tickets", "$top": 1000})
                for _ in range(start, min(reads, start + READS_PER_STEP))
            ]
            out = await env.step({"type": "call_tool", "parallel_tool_calls": batch})
            results = (out.get("observation") or {}).get("tool_results") or []
            largest = max([largest, *(len(json.dumps(r).encode()) for r in results)])
        rec["reads_s"] = round(time.monotonic() - t, 1)
        rec["rss_after_reads"] = _rss(pid)
        rec["largest_reply_bytes"] = largest
        final = await env.step({"type": "submit_message", "content": "All done."})
        rec["reward"] = final.get("reward")
        rec["reward_type"] = (final.get("observation") or {}).get("reward_type")
    await asyncio.sleep(20)
    rec["rss_20s_after"] = _rss(pid)
    return rec


def _out_bytes(out: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for sub in ("trajectories", "attempts", "states"):
        files = [f for f in (out / sub).glob("*") if f.is_file()]
        sizes[sub] = max((f.stat().st_size for f in files), default=0)
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickets", type=int, default=280)
    ap.add_argument("--reads", type=int, default=28)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument(
        "--description-bytes",
        type=int,
        default=UNDER_THE_CAP,
        help="per ticket (default: just under the per-call cap; the review's: 921600 with --tickets 20)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    task = demo_tasks("retail")[0]
    with tempfile.TemporaryDirectory(prefix="tbx-heavy-") as tmp:
        served = start_env_serve(Path(tmp), [task], 1)
        try:
            time.sleep(5)
            rest = _rss(served.proc.pid)
            episodes = []
            for _ in range(args.episodes):
                episodes.append(
                    asyncio.run(
                        one_episode(
                            served.url,
                            task.id,
                            served.proc.pid,
                            args.tickets,
                            args.reads,
                            args.description_bytes,
                        )
                    )
                )
            sizes = _out_bytes(Path(tmp) / "env-out")
        finally:
            served.stop()
    report = {"rss_at_rest": rest, "episodes": episodes, "largest_file_bytes": sizes}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"env serve RSS at rest: {rest:.0f} MiB")
        for i, e in enumerate(episodes, 1):
            print(
                f"episode {i}: RSS after creates {e['rss_after_creates']:.0f} MiB, after reads "
                f"{e['rss_after_reads']:.0f} MiB, 20 s after {e['rss_20s_after']:.0f} MiB; largest reply "
                f"{e['largest_reply_bytes'] / 1024:.0f} KiB; reads {e['reads_s']} s; reward {e['reward']} "
                f"({e['reward_type']})"
            )
        print("largest file in --out: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
