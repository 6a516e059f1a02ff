"""`tbx`: the command line. One module per command in this package, each
with `register(subparsers)`; this module builds the parser from them and is
the one place that turns typed errors into messages and exit codes.

tbx images build [--force] [NAME ...]
tbx gc [--all | --run RUN | --older-than SECONDS]
tbx up TASK_ID [--dataset DIR] [--json] | tbx up --pg-seed FILE.json --domain NAME
tbx proxy [--port N] [--admin-port N] [--call-timeout S] [--json]
tbx tasks validate [DIR] | tbx tasks list [DIR]
tbx run --dataset DIR --agent A --out OUT [...]
tbx conformance --dataset DIR --traces DIR [--domain NAME] [--tasks IDS] [--json] [--concurrency N]
tbx judge regrade RESULTS [--golden-cache DIR] [--no-replay] [--rejudge-rubrics] [--dry-run] [--json]
tbx report DIR [DIR...] [--json] [--out DIR] [--models-config FILE] [--k K]
tbx compare A B [C ...] [--json] [--out DIR] [--seed S]
"""

from __future__ import annotations

import argparse
import logging
import sys

from bench.cli import (
    compare,
    conformance,
    env,
    gc,
    images,
    proxy,
    regrade,
    report,
    run,
    session_proxy,
    signals,
    tasks,
    up,
    view,
)
from bench.run.errors import RunError
from sandbox.errors import SandboxError

COMMANDS = (
    images,
    gc,
    up,
    proxy,
    tasks,
    run,
    conformance,
    regrade,
    report,
    compare,
    view,
    env,
    session_proxy,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tbx", description="Per-attempt sandboxes for stateful agent evaluation."
    )
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    try:
        code = int(args.fn(args))
    except RunError as exc:
        print(exc, file=sys.stderr)
        code = 1
    except SandboxError as exc:
        print(f"tbx: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("tbx: interrupted", file=sys.stderr)
        code = 130
    # A command stopped by SIGTERM/SIGHUP/SIGINT exits 128 + that signal, even when
    # its teardown finished normally (`tbx up` and `tbx proxy` return 0 after it).
    return signals.exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
