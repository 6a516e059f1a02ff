"""An image's code trees (its `/usr`, the server's venv) served from Docker volumes.

With fuse-overlayfs (this machine's storage driver, and rootless Docker's) every
container has its own FUSE mount of its image: each file a service opens at start
(the server imports ~570 modules, PostgreSQL and Typesense map their binaries and
libraries) is read through the FUSE daemon, and the pages are cached per mount, so
no two sets share them. An image names the trees it only ever reads in its
`tbx.runtime-paths` label; each is copied once per image id into a named volume
(Docker copies an image's content into an empty volume when a container mounting
it is created) and every attempt container mounts it read-only. Volumes live on
the daemon's own filesystem: reads are native and their page cache is shared.
Measured in benchmarks/density.py (`--variants fuse current`, docs/performance.md).

The attempt's isolation is unchanged: the trees are read-only in every container
(as the read-only root filesystem made them before) and carry nothing of any attempt.
Images without the label (older builds, baselines) run as before;
TBX_RUNTIME_VOLUMES=0 turns the volumes off.

A volume is complete once its marker volume (`NAME.ready`) exists: a process
killed mid-copy leaves no marker, and the next one copies again. `sweep_stale`
removes the volumes of images that no longer exist (`tbx gc`, `tbx images build`).
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker.errors
from docker.types import Mount

from sandbox import labels as lbl
from sandbox.cache import cache_dir
from sandbox.docker_api import docker_client, remove_container
from sandbox.errors import SandboxError

PATHS_LABEL = "tbx.runtime-paths"  # on an image: the trees its services only read
VOLUME_LABEL = "tbx.runtime"  # on a volume: the id of the image it copies
PATH_LABEL = "tbx.runtime.path"
ENABLE_ENV = "TBX_RUNTIME_VOLUMES"
READY_SUFFIX = ".ready"

_cache: dict[str, list[Mount]] = {}
_cache_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1") != "0"


VOLUME_PREFIX = "tbx-rt-"


def _image_part(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:16]


def volume_name(image_id: str, path: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", path).strip("-") or "root"
    return f"{VOLUME_PREFIX}{_image_part(image_id)}-{slug}"


def mounts_for(image: str) -> list[Mount]:
    """Read-only mounts of `image`'s runtime volumes, made on first use (cached per process)."""
    if not enabled():
        return []
    with _cache_lock:
        if image in _cache:
            return _cache[image]
    mounts = _ensure(image)
    if mounts is None:
        # No such image: the container's start says so (sandbox.ImageMissingError); not
        # cached, so a build later in this process gets its volumes.
        return []
    with _cache_lock:
        _cache[image] = mounts
    return mounts


def prepare(images: list[str]) -> None:
    """Make the volumes of these images now (a run's start), not in its first boots."""
    for image in images:
        mounts_for(image)


def _ensure(image: str) -> list[Mount] | None:
    client = docker_client()
    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:
        return None
    paths = (img.labels or {}).get(PATHS_LABEL, "").split()
    if not paths:
        return []
    mounts = []
    for path in paths:
        name = volume_name(img.id, path)
        with _file_lock(name):
            if not _exists(name + READY_SUFFIX):
                _fill(img.id, path, name)
        mounts.append(Mount(target=path, source=name, type="volume", read_only=True))
    return mounts


def _exists(volume: str) -> bool:
    try:
        docker_client().volumes.get(volume)
        return True
    except docker.errors.NotFound:
        return False


def _fill(image_id: str, path: str, name: str) -> None:
    """Copy `path` of the image into a fresh volume `name`, then mark it complete."""
    client = docker_client()
    labels = {VOLUME_LABEL: image_id, PATH_LABEL: path, lbl.CREATED: str(int(time.time()))}
    if _exists(name):  # a copy that did not finish (no marker): start over
        client.volumes.get(name).remove(force=True)
    try:
        client.volumes.create(name, labels=labels)
        # The copy happens in the daemon when the container is created; it is never started.
        # Labelled like an attempt's container, so a sweep removes it if we die right here.
        holder = client.containers.create(
            image_id,
            command=["true"],
            network_mode="none",
            labels=lbl.labels_for("tbx-runtime", lbl.new_id("runtime"), "runtime-copy", os.getpid()),
            mounts=[Mount(target=path, source=name, type="volume")],
        )
        remove_container(holder)
        client.volumes.create(name + READY_SUFFIX, labels=labels)
    except docker.errors.APIError as exc:
        raise SandboxError(
            f"could not copy {path} of image {image_id[:19]} into volume {name}: "
            f"{exc.explanation or exc} (a full disk under the Docker root? `docker system df`; "
            f"or run without runtime volumes: {ENABLE_ENV}=0)"
        ) from exc


def _locks_dir() -> Path:
    return cache_dir("runtime-volumes")


@contextmanager
def _file_lock(name: str) -> Iterator[None]:
    """One copier per volume on this host (parallel runs, a pool's boot threads)."""
    base = _locks_dir()
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sweep_stale() -> tuple[list[str], list[str]]:
    """Remove runtime volumes whose image is gone. Returns (removed, kept: still in use)."""
    client = docker_client()
    existing = {img.id for img in client.images.list(all=True)}
    removed, kept = [], []
    for vol in client.volumes.list(filters={"label": VOLUME_LABEL}):
        if (vol.attrs.get("Labels") or {}).get(VOLUME_LABEL) in existing:
            continue
        try:
            vol.remove()
            removed.append(vol.name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError:
            kept.append(vol.name)  # mounted by a container still alive
    with _cache_lock:
        _cache.clear()
    return removed, kept


def prune_locks(existing_image_ids: set[str]) -> list[str]:
    """Remove the lock files of volumes whose image no longer exists (none is copied
    again); a lock held right now is left. Returns the removed file names."""
    live = {_image_part(i) for i in existing_image_ids}
    base = _locks_dir()
    removed = []
    for path in sorted(base.glob(f"{VOLUME_PREFIX}*.lock")) if base.is_dir() else []:
        if path.name.removeprefix(VOLUME_PREFIX)[:16] in live:
            continue
        with open(path, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a copier holds it
            path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


__all__ = [
    "ENABLE_ENV",
    "PATHS_LABEL",
    "enabled",
    "mounts_for",
    "prepare",
    "prune_locks",
    "sweep_stale",
    "volume_name",
]
