"""`tbx gc [--older-than SECONDS | --run RUN | --all]`: remove containers and networks tbx left behind,
the runtime volumes (sandbox.runtime_volumes) of images that no longer exist, and
what the host cache holds for no live process or existing image: golden sets of
removed servers-image builds, in-use records of exited processes, runtime-volume
lock files of removed images.

By default only orphans go (their owning process exited, or they are older
than the TTL); live runs' sandboxes are kept and listed."""

from __future__ import annotations

import argparse
from typing import Any

from sandbox import ORPHAN_TTL


def register(sub: Any) -> None:
    gc = sub.add_parser(
        "gc",
        help="remove containers and networks tbx left behind (default: orphans only, "
        f"i.e. items whose owning process exited or older than {ORPHAN_TTL / 3600:g} h)",
    )
    scope = gc.add_mutually_exclusive_group()
    scope.add_argument("--run", help="all of this run's items, even if its process still runs")
    scope.add_argument(
        "--older-than",
        type=float,
        help=f"orphans: owner exited or older than SECONDS (default {ORPHAN_TTL:g})",
    )
    scope.add_argument(
        "--all", action="store_true", help="everything tbx created, including live runs' sandboxes"
    )
    gc.set_defaults(fn=gc_command)


def gc_command(args: argparse.Namespace) -> int:
    from sandbox import sweep, sweep_stale

    if args.all:
        result = sweep(everything=True)
    elif args.run:
        result = sweep(run=args.run)
    else:
        result = sweep(older_than=args.older_than)  # orphans only (default TTL unless given)
    print(result)
    removed, in_use = sweep_stale()
    if removed or in_use:
        print(f"runtime volumes of removed images: removed {len(removed)}, still mounted {len(in_use)}")
    pruned = prune_cache()
    if any(pruned.values()):
        print("host cache: removed " + ", ".join(f"{len(v)} {k}" for k, v in pruned.items()))
    return 0


def prune_cache() -> dict[str, list[str]]:
    """What the host cache holds for no live process or existing image, removed:
    what kind -> the names removed."""
    from bench.run.golden import prune_golden
    from sandbox import docker_client, prune_in_use_records, prune_locks

    images = {img.id for img in docker_client().images.list(all=True)}
    return {
        "golden sets of removed servers builds": prune_golden(images),
        "in-use records of exited processes": prune_in_use_records(),
        "runtime-volume locks of removed images": prune_locks(images),
    }
