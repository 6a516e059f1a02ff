"""`tbx images build [--force] [NAME ...]`: build (or reuse) images tagged by the hash of their inputs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def register(sub: Any) -> None:
    images = sub.add_parser("images", help="build tbx's container images")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    build = images_sub.add_parser("build", help="build (or reuse) images tagged by the hash of their inputs")
    build.add_argument("names", nargs="*", help="postgres, typesense, servers, evaluator (default: all)")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    build.set_defaults(fn=build_command)


def build_command(args: argparse.Namespace) -> int:
    from sandbox import IMAGES, build_image, prune_stale, sweep_stale

    for name in args.names or list(IMAGES):
        if name not in IMAGES:
            print(f"unknown image {name!r}; known: {', '.join(IMAGES)}", file=sys.stderr)
            return 2
        r = build_image(name, force=args.force)
        print(f"{'reused' if r.reused else 'built '} {r.tag:<36} {r.digest}  ({r.seconds:.1f}s)", flush=True)
        # Several checkouts sharing one daemon (worktrees, parallel CI jobs) would
        # prune each other's tags: TBX_KEEP_IMAGES=1 keeps every older tag.
        if not os.environ.get("TBX_KEEP_IMAGES"):
            prune_stale(name)
    sweep_stale()  # runtime volumes of images no longer on the daemon
    return 0
