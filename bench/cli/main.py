"""`tbx`: the command line. One module per command in this package, each
with `register(subparsers)`; this module builds the parser from them and is
the one place that turns typed errors into messages and exit codes.

tbx --version
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
import errno
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
from bench.dataset import DatasetError
from bench.llm.config import ModelsConfigError
from bench.run.errors import RunError
from bench.terminal_text import printable, printable_lines
from sandbox import SandboxError
from servers.registry import UnknownDomainError

# A path tbx was told to use that cannot take it (read-only, full, a file where a folder
# should be, no permission): the user's to fix, not a crash.
_UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR)

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


class _Version(argparse.Action):
    """`tbx --version`: asks git (in a checkout) only when asked, not on every command."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and source commit, and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from bench.version import version_line

        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tbx", description="Per-attempt sandboxes for stateful agent evaluation."
    )
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return p


def _dataset_error_text(exc: DatasetError) -> str:
    """The error's summary line, then one line per problem, each escaped on its own line."""
    problems = [str(p) for p in exc.problems]
    text = str(exc)
    head = text.removesuffix("\n" + "\n".join(problems)) if problems else text
    return "\n".join(printable(line) for line in [head, *problems])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    try:
        code = int(args.fn(args))
    # Messages quote data (task ids, paths, error texts): shown escaped (bench.terminal_text).
    except DatasetError as exc:  # bad data is a usage error, found before anything started
        print(_dataset_error_text(exc), file=sys.stderr)
        code = 2
    except UnknownDomainError as exc:
        print(f"tbx: {printable(exc.args[0])}", file=sys.stderr)
        code = 2
    except ModelsConfigError as exc:  # the models config or a key: a usage error, nothing written
        text = str(exc)
        print(printable(text if text.startswith("tbx") else f"tbx: {text}"), file=sys.stderr)
        code = 2
    except RunError as exc:
        print(printable(exc), file=sys.stderr)
        code = exc.exit_code
    except SandboxError as exc:  # may carry a build log: its lines kept
        print(f"tbx: {printable_lines(exc)}", file=sys.stderr)
        code = 2
    except OSError as exc:
        if exc.errno not in _UNWRITABLE:
            raise
        print(printable(f"tbx: {exc.filename or 'a path it was given'}: {exc.strerror}"), file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("tbx: interrupted", file=sys.stderr)
        code = 130
    # A command stopped by SIGTERM/SIGHUP/SIGINT exits 128 + that signal, even when
    # its teardown finished normally (`tbx up` and `tbx proxy` return 0 after it).
    return signals.exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
