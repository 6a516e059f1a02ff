"""Build and find tbx's images. Tags carry a content hash of their inputs, so a
build is reused until an input changes, and a sandbox never runs a stale image.

    tbx images build [--force] [NAME ...]     (bench.cli.images)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker.errors

from sandbox.cache import cache_dir
from sandbox.docker_api import docker_client
from sandbox.errors import ImageMissingError, SandboxError

# Where the inputs are. tbx's packages sit side by side in a checkout's root and in
# site-packages alike; images/ and constraints.txt are the checkout's, or, in an
# installed wheel, package data under sandbox/image_inputs/ (build_hooks.py puts them there).
PACKAGES_ROOT = Path(__file__).resolve().parents[1]
WHEEL_INPUTS = Path(__file__).resolve().parent / "image_inputs"
PACKAGE_INPUTS = frozenset({"servers", "judge"})  # inputs read from tbx's own (installed) packages
BASE_TAG = "debian:bookworm-slim"
LABEL = "tbx.image"


@dataclass(frozen=True)
class InputRoots:
    """Where the image inputs are found. Each input is named by its path relative to its root
    (`images/postgres/Dockerfile`, `servers/engine/store.py`, `constraints.txt`): a tag hashes
    those names, never where the files were, so a checkout and an installed wheel of the same
    source compute the same tags and find each other's images."""

    data: Path  # holds images/ and constraints.txt
    packages: Path  # holds tbx's packages (servers/)

    def root_of(self, name: str) -> Path:
        return self.packages if name.split("/", 1)[0] in PACKAGE_INPUTS else self.data

    @property
    def images(self) -> Path:
        return self.data / "images"


def input_roots() -> InputRoots:
    """The installed wheel's package data when there is some, else the checkout's files."""
    data = WHEEL_INPUTS if WHEEL_INPUTS.is_dir() else PACKAGES_ROOT
    return InputRoots(data=data, packages=PACKAGES_ROOT)


@dataclass(frozen=True)
class ImageSpec:
    name: str
    # Inputs outside images/<name>/ (globs of names relative to their root, see InputRoots).
    extra_inputs: tuple[str, ...] = ()


IMAGES: dict[str, ImageSpec] = {
    "postgres": ImageSpec("postgres"),
    "typesense": ImageSpec("typesense"),
    "servers": ImageSpec("servers", extra_inputs=("servers/**/*.py", "constraints.txt")),
    # The test-function sandbox: its own files and the judge's prompt and answer rules.
    "evaluator": ImageSpec("evaluator", extra_inputs=("judge/yesno.py",)),
}


def input_files(spec: ImageSpec, roots: InputRoots) -> dict[str, Path]:
    """name -> file of every input of the image, in name order (by path component)."""
    found: dict[str, Path] = {}
    for pattern in (f"images/{spec.name}/**/*", *spec.extra_inputs):
        root = roots.root_of(pattern)
        for p in root.glob(pattern):
            if p.is_file() and "__pycache__" not in p.parts:
                found[p.relative_to(root).as_posix()] = p
    return {name: found[name] for name in sorted(found, key=PurePosixPath)}


def content_hash(spec: ImageSpec, roots: InputRoots | None = None) -> str:
    h = hashlib.sha256()
    for name, path in input_files(spec, roots or input_roots()).items():
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def image_tag(name: str) -> str:
    return f"tbx/{name}:{content_hash(IMAGES[name])}"


def require_image(name: str) -> str:
    """The tag a sandbox must run; a clear error when it has not been built."""
    tag = image_tag(name)
    try:
        docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        raise ImageMissingError(
            f"image {tag} is missing (its inputs changed or it was never built): run `make images` "
            f"or `tbx images build {name}`"
        ) from None
    return tag


@dataclass(frozen=True)
class BuildResult:
    name: str
    tag: str
    digest: str
    reused: bool
    seconds: float


def ensure_base() -> None:
    try:
        docker_client().images.get(BASE_TAG)
        return
    except docker.errors.ImageNotFound:
        pass
    script = input_roots().images / "base" / "build-base.sh"
    subprocess.run(["bash", str(script)], check=True)


def build_image(name: str, force: bool = False) -> BuildResult:
    roots = input_roots()
    tag = image_tag(name)
    client = docker_client()
    start = time.monotonic()
    if not force:
        try:
            img = client.images.get(tag)
            return BuildResult(name, tag, img.id, True, time.monotonic() - start)
        except docker.errors.ImageNotFound:
            pass
    ensure_base()
    with tempfile.TemporaryDirectory(prefix=f"tbx-build-{name}-") as tmp:
        ctx = Path(tmp)
        context = roots.images / name
        shutil.copytree(context, ctx, dirs_exist_ok=True)
        prepare = context / "prepare.sh"
        if prepare.exists():
            env = {
                **os.environ,
                "TBX_IMAGE_INPUTS": str(roots.data),
                "TBX_PACKAGES": str(roots.packages),
                "TBX_PYTHON": sys.executable,
            }
            subprocess.run(["bash", str(prepare), str(ctx)], check=True, env=env)
        # The docker CLI streams progress and honours the host's build settings;
        # docker-py's build() would buffer it all.
        proc = subprocess.run(
            [
                "docker",
                "build",
                "-q",
                "--label",
                f"{LABEL}={name}",
                "-t",
                tag,
                "-t",
                f"tbx/{name}:latest",
                str(ctx),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SandboxError(f"building image {name} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    img = client.images.get(tag)
    return BuildResult(name, tag, img.id, False, time.monotonic() - start)


def _in_use_dir() -> Path:
    return cache_dir("images-in-use")


def mark_in_use(tags: list[str]) -> None:
    """Record that this process runs these tags, so a concurrent `tbx images build`
    does not prune them from under a long run (one small file per process)."""
    d = _in_use_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{os.getpid()}.json"
        held = set(json.loads(path.read_text())) if path.exists() else set()
        path.write_text(json.dumps(sorted(held | set(tags))))
    except (OSError, ValueError):
        pass  # best effort: without the record a rebuild may prune, and the run says so


def prune_in_use_records() -> list[str]:
    """Remove the in-use records of processes that exited (`tbx gc`, every build);
    returns their file names."""
    from sandbox.sweeper import _pid_alive

    d = _in_use_dir()
    removed = []
    for path in d.glob("*.json") if d.exists() else []:
        if not path.stem.isdigit() or not _pid_alive(int(path.stem)):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def tags_in_use() -> set[str]:
    prune_in_use_records()
    tags: set[str] = set()
    d = _in_use_dir()
    for path in d.glob("*.json") if d.exists() else []:
        try:
            tags.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return tags


def prune_stale(name: str) -> list[str]:
    """Remove older content-hash tags of an image (keep the current one and any
    tag a live tbx process is running)."""
    current = image_tag(name)
    keep = {current, f"tbx/{name}:latest"} | tags_in_use()
    removed = []
    for img in docker_client().images.list(filters={"label": f"{LABEL}={name}"}):
        for t in img.tags:
            if t.startswith(f"tbx/{name}:") and t not in keep:
                try:
                    docker_client().images.remove(t, noprune=False)
                    removed.append(t)
                except docker.errors.APIError:
                    continue
    return removed
