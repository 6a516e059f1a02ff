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


# ---- a checkout's server package (servers/servers.yaml, type mcp-process) ------------------

CHECKOUT_CONTEXT = "checkout-server"  # images/checkout-server: Dockerfile, known/<project>.txt
CHECKOUT_PYTHON = "/opt/checkout/venv/bin/python"  # `{python}` in a servers.yaml command
# What a wheel of the image must run on: the servers image's CPython 3.11 (Debian bookworm), glibc.
_PLATFORM_ARGS = ("--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp")


@dataclass(frozen=True)
class CheckoutPackage:
    """A server package of a checkout: its folder (holding pyproject.toml) and, if the user
    gives one, a pip constraints file applied when its dependencies are resolved."""

    folder: Path
    constraints: Path | None = None


@dataclass(frozen=True)
class PackageRequirements:
    project: str
    requirements: tuple[str, ...]  # declared + build-system + tbx's known-good additions
    constraints_text: str  # the user's constraints file, as read ("" without one)


def package_requirements(package: CheckoutPackage) -> PackageRequirements:
    """What to resolve for a package, from its pyproject.toml (read as data, never run)."""
    import tomllib

    from sandbox.errors import CheckoutServerError

    pyproject = package.folder / "pyproject.toml"
    if not package.folder.is_dir():
        raise CheckoutServerError(f"server package folder {package.folder} does not exist")
    try:
        meta = tomllib.loads(pyproject.read_text())
    except FileNotFoundError:
        raise CheckoutServerError(f"server package folder {package.folder} has no pyproject.toml") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CheckoutServerError(f"{pyproject}: {exc}") from None
    project = str(meta.get("project", {}).get("name") or package.folder.name)
    declared = [str(r) for r in meta.get("project", {}).get("dependencies", [])]
    build = [str(r) for r in meta.get("build-system", {}).get("requires", ["setuptools", "wheel"])]
    known = input_roots().images / CHECKOUT_CONTEXT / "known" / f"{project}.txt"
    extra = _requirement_lines(known.read_text()) if known.is_file() else []
    constraints = ""
    if package.constraints is not None:
        try:
            constraints = package.constraints.read_text()
        except OSError as exc:
            raise CheckoutServerError(f"constraints file {package.constraints}: {exc}") from None
    return PackageRequirements(project, tuple([*declared, *build, *extra]), constraints)


def _requirement_lines(text: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def resolved_wheels(reqs: PackageRequirements) -> Path:
    """A folder of wheels for the requirements, resolved on the host with pip and cached per
    (requirements, constraints): an unchanged package never asks the index again."""
    from sandbox.errors import CheckoutServerError

    key = hashlib.sha256(json.dumps([reqs.requirements, reqs.constraints_text]).encode()).hexdigest()[:16]
    folder = cache_dir("wheels-checkout", key)
    if (folder / ".complete").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    arch = os.uname().machine
    platforms = [f"manylinux_2_36_{arch}", f"manylinux_2_17_{arch}", f"manylinux2014_{arch}"]
    with tempfile.TemporaryDirectory(prefix="tbx-checkout-reqs-") as tmp:
        req_file, con_file = Path(tmp, "requirements.txt"), Path(tmp, "constraints.txt")
        req_file.write_text("\n".join(reqs.requirements) + "\n")
        con_file.write_text(reqs.constraints_text)
        cmd = [sys.executable, "-m", "pip", "download", "-q", *_PLATFORM_ARGS]
        for p in platforms:
            cmd += ["--platform", p]
        cmd += ["-r", str(req_file), "-c", str(con_file), "-d", str(folder)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise CheckoutServerError(
            f"resolving the dependencies of {reqs.project} failed ({' '.join(reqs.requirements)}):\n"
            f"{proc.stderr.strip()[-2000:]}"
        )
    (folder / ".complete").touch()
    return folder


def _package_files(folder: Path) -> dict[str, Path]:
    found = {
        p.relative_to(folder).as_posix(): p
        for p in folder.rglob("*")
        if p.is_file()
        and not ({"__pycache__", ".git", ".venv", "build", "dist"} & set(p.relative_to(folder).parts))
        and not p.name.endswith(".egg-info")
    }
    return {name: found[name] for name in sorted(found, key=PurePosixPath)}


def checkout_image_tag(package: CheckoutPackage, servers_image: str) -> tuple[str, PackageRequirements, Path]:
    """(tag, requirements, wheel folder) of a package's image: the tag hashes the package's
    files, the resolved wheels' names (their versions), the bridge's image (servers_image,
    itself a content hash) and the Dockerfile, so unchanged code never rebuilds."""
    reqs = package_requirements(package)
    wheels = resolved_wheels(reqs)
    h = hashlib.sha256()
    context = input_roots().images / CHECKOUT_CONTEXT
    h.update((context / "Dockerfile").read_bytes() + b"\0" + servers_image.encode() + b"\0")
    for name in sorted(p.name for p in wheels.glob("*.whl")):
        h.update(name.encode() + b"\0")
    for name, path in _package_files(package.folder).items():
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    slug = "".join(c if c.isalnum() else "-" for c in reqs.project.lower())
    return f"tbx/checkout-{slug}:{h.hexdigest()[:16]}", reqs, wheels


def build_checkout_image(package: CheckoutPackage, force: bool = False) -> BuildResult:
    """The image of a checkout's server package: the servers image (the bridge) plus a venv
    with the package and its resolved dependencies. Built once per tag (see checkout_image_tag)."""
    from sandbox.errors import CheckoutServerError

    start = time.monotonic()
    servers_image = require_image("servers")
    tag, reqs, wheels = checkout_image_tag(package, servers_image)
    name = tag.split(":", 1)[0].removeprefix("tbx/")
    client = docker_client()
    if not force:
        try:
            return BuildResult(name, tag, client.images.get(tag).id, True, time.monotonic() - start)
        except docker.errors.ImageNotFound:
            pass
    with tempfile.TemporaryDirectory(prefix=f"tbx-build-{name}-") as tmp:
        ctx = Path(tmp)
        shutil.copy(input_roots().images / CHECKOUT_CONTEXT / "Dockerfile", ctx / "Dockerfile")
        (ctx / "wheels").mkdir()
        pins = []
        for whl in sorted(wheels.glob("*.whl")):
            shutil.copy(whl, ctx / "wheels" / whl.name)
            dist, version = whl.name.split("-")[:2]
            if dist.lower().replace("_", "-") not in ("setuptools", "wheel"):
                pins.append(f"{dist}=={version}")
        (ctx / "requirements.txt").write_text("\n".join(pins) + "\n")
        for rel, path in _package_files(package.folder).items():
            target = ctx / "package" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        proc = subprocess.run(
            [
                *("docker", "build", "-q", "--build-arg", f"SERVERS_IMAGE={servers_image}"),
                *("--label", f"{LABEL}={name}", "-t", tag, str(ctx)),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise CheckoutServerError(
                f"building the image of {reqs.project} ({package.folder}) failed:\n"
                f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            )
    return BuildResult(name, tag, client.images.get(tag).id, False, time.monotonic() - start)
