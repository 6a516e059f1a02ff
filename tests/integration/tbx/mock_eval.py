"""`inspect eval tbx/thinkingbox_bench` with Inspect's `mockllm` model scripted, run as a
process of its own, as a user's eval is (the task found by its registry name through the
`inspect_ai` entry point; a checkout's root on sys.path would hide the installed
distribution's metadata from Inspect's naming).

    python mock_eval.py golden|golden-kill|default LOG_DIR DATASET TASKS [--epochs N]
                        [--max-samples N] [--warm N] [--skip-rubrics]

golden: each task's golden calls, one per step (the task found by its query, the step by
the tool replies so far), then `<DONE>`; golden-kill: the same, the eval's first call
killing its attempt's tool server container first (run with retry_on_error=1); default:
mockllm's default output at every turn. mockllm counts tokens with tiktoken unless an
output carries its usage (a download this machine cannot make), so each one carries one.
Prints the log's path. benchmarks/inspect_overhead.py runs it too (golden, against `tbx run
--agent oracle`).
"""

from __future__ import annotations

import argparse
from typing import Any

import docker
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.model._providers.mockllm import MockLLM
from inspect_ai.util import sandbox

from bench.dataset import load_benchmark

USAGE = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)


def _used(out: ModelOutput) -> ModelOutput:
    out.usage = USAGE
    return out


def golden_player(dataset: str, kill: bool) -> Any:
    from tbx.sandboxenv import TbxSandbox

    bench = load_benchmark(dataset)
    golden = {t.query: bench.golden_calls(t) for t in bench.tasks}
    killed: list[str] = []

    def play(input: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        if kill and not killed:
            lease = sandbox().as_type(TbxSandbox).attempt.held.live.lease
            role, cid = next((r, c) for r, c in lease.containers.items() if r.startswith("server"))
            docker.from_env().containers.get(cid).kill()
            killed.append(role)
        query = next(m.text for m in input if m.role == "user")
        calls = golden[query]
        n = sum(m.role == "tool" for m in input)
        if n < len(calls):
            name, args = calls[n]
            return _used(ModelOutput.for_tool_call("mockllm", name, args, tool_call_id=f"golden_{n}"))
        return _used(ModelOutput.from_content("mockllm", "Your request is complete. <DONE>"))

    return play


def default_output(input: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
    return _used(ModelOutput.from_content("mockllm", MockLLM.default_output))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["golden", "golden-kill", "default"])
    parser.add_argument("log_dir")
    parser.add_argument("dataset")
    parser.add_argument("tasks", help="comma-separated task ids; empty: every task")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-samples", type=int, default=None)
    parser.add_argument("--warm", type=int, default=1)
    parser.add_argument("--skip-rubrics", action="store_true")
    args = parser.parse_args()
    kill = args.mode == "golden-kill"
    outputs = default_output if args.mode == "default" else golden_player(args.dataset, kill)
    task_args: dict[str, Any] = {
        "dataset": args.dataset,
        "warm": args.warm,
        "skip_rubrics": args.skip_rubrics,
    }
    if args.tasks:
        task_args["tasks"] = args.tasks
    [log] = inspect_eval(
        "tbx/thinkingbox_bench",
        task_args=task_args,
        model=get_model("mockllm/model", custom_outputs=outputs),
        epochs=args.epochs,
        max_samples=args.max_samples,
        retry_on_error=1 if kill else None,
        log_dir=args.log_dir,
        display="none",
    )
    print(log.location)


if __name__ == "__main__":
    main()
