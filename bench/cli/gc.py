"""`tbx gc [--all | --run RUN | --older-than SECONDS]`: remove containers and networks tbx left behind."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    gc = sub.add_parser("gc", help="remove containers and networks tbx left behind")
    gc.add_argument("--run", help="only this run's items")
    gc.add_argument("--older-than", type=float, help="only items older than SECONDS (or whose owner died)")
    gc.add_argument("--all", action="store_true", help="everything tbx created (the default)")
    gc.set_defaults(fn=gc_command)


def gc_command(args: argparse.Namespace) -> int:
    from sandbox.sweeper import sweep

    if args.run:
        result = sweep(run=args.run)
    elif args.older_than is not None:
        result = sweep(older_than=args.older_than, orphans=True)
    else:
        result = sweep()
    print(result)
    return 0
