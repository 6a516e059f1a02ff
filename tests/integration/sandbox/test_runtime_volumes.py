"""An image's code trees served from read-only volumes (sandbox.runtime_volumes), on
real Docker with a small image of the test's own (nothing shared with other tests)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from sandbox import labels as lbl
from sandbox import runtime_volumes as rv
from sandbox.images import BASE_TAG

pytestmark = pytest.mark.docker

DOCKERFILE = f"""FROM {BASE_TAG}
RUN mkdir -p /opt/rt/lib && echo hello > /opt/rt/lib/greeting && chmod 0640 /opt/rt/lib/greeting
LABEL {rv.PATHS_LABEL}="/opt/rt"
"""


@pytest.fixture
def image(dclient: docker.DockerClient) -> Iterator[Any]:
    tag = f"tbx-test-runtime:{uuid.uuid4().hex[:10]}"
    # A unique layer, so the image id (and its volumes) belong to this test alone.
    unique = DOCKERFILE + f"LABEL tbx.test={tag.split(':')[1]}\n"
    img, _ = dclient.images.build(fileobj=io.BytesIO(unique.encode()), tag=tag, rm=True, network_mode="none")
    try:
        yield img
    finally:
        with contextlib.suppress(docker.errors.NotFound):  # the tests remove it; this is the backstop
            dclient.images.remove(img.id, force=True)
        for vol in dclient.volumes.list(filters={"label": f"{rv.VOLUME_LABEL}={img.id}"}):
            vol.remove(force=True)


def _read(dclient: docker.DockerClient, image: Any, mounts: list[Any], cmd: str) -> tuple[int, str]:
    c = dclient.containers.run(
        image.id,
        ["sh", "-c", cmd],
        mounts=mounts,
        network_mode="none",
        read_only=True,
        detach=True,
        labels=lbl.labels_for("tbx-test-runtime", lbl.new_id("t"), "reader", 0),
    )
    try:
        code = c.wait(timeout=60)["StatusCode"]
        return code, c.logs().decode()
    finally:
        c.remove(force=True)


def test_volumes_copy_the_tree_once_read_only_and_go_with_the_image(
    dclient: docker.DockerClient, image: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rv, "_cache", {})
    name = rv.volume_name(image.id, "/opt/rt")

    # Several boots at once on a new image: one copy, every one gets the same mount.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: rv._ensure(image.id), range(4)))
    assert results[0] is not None and all(r == results[0] for r in results)
    [mount] = results[0]
    assert mount["Target"] == "/opt/rt" and mount["Source"] == name and mount["ReadOnly"] is True
    assert {v.name for v in dclient.volumes.list(filters={"label": f"{rv.VOLUME_LABEL}={image.id}"})} == {
        name,
        name + rv.READY_SUFFIX,
    }
    # The copier container is gone; nothing of it is left for a sweep.
    assert dclient.containers.list(all=True, filters={"label": f"{lbl.RUN}=tbx-runtime"}) == []

    # The image's content with its modes, and not writable through the mount.
    code, out = _read(dclient, image, [mount], "cat /opt/rt/lib/greeting && stat -c %a /opt/rt/lib/greeting")
    assert (code, out.split()) == (0, ["hello", "640"])
    code, _ = _read(dclient, image, [mount], "echo x > /opt/rt/lib/greeting")
    assert code != 0

    # No such image: no mounts (the container's start reports the missing image), nothing cached.
    assert rv.mounts_for("tbx-test-runtime:no-such-tag") == []
    assert "tbx-test-runtime:no-such-tag" not in rv._cache

    # The switch: no volumes at all.
    monkeypatch.setenv(rv.ENABLE_ENV, "0")
    assert rv.mounts_for(image.id) == []
    monkeypatch.delenv(rv.ENABLE_ENV)

    # A copy that did not finish (no marker; here: an empty volume) is made again.
    dclient.volumes.get(name + rv.READY_SUFFIX).remove()
    dclient.volumes.get(name).remove()
    dclient.volumes.create(name, labels={rv.VOLUME_LABEL: image.id})
    [mount] = rv._ensure(image.id) or []
    code, out = _read(dclient, image, [mount], "cat /opt/rt/lib/greeting")
    assert (code, out.strip()) == (0, "hello")

    # The image exists: a sweep keeps its volumes. Once it is gone, they go.
    removed, _ = rv.sweep_stale()
    assert name not in removed
    dclient.images.remove(image.id, force=True)
    removed, in_use = rv.sweep_stale()
    assert {name, name + rv.READY_SUFFIX} <= set(removed) and in_use == []
    assert dclient.volumes.list(filters={"label": f"{rv.VOLUME_LABEL}={image.id}"}) == []


def test_a_volume_still_mounted_is_kept_and_reported(dclient: docker.DockerClient, image: Any) -> None:
    [mount] = rv._ensure(image.id) or []
    holder = dclient.containers.create(
        BASE_TAG,  # another image: the test's own can go while the volume is mounted
        ["true"],
        mounts=[mount],
        network_mode="none",
        labels=lbl.labels_for("tbx-test-runtime", lbl.new_id("t"), "holder", 0),
    )
    try:
        dclient.images.remove(image.id, force=True)
        removed, in_use = rv.sweep_stale()
        assert mount["Source"] in in_use and mount["Source"] + rv.READY_SUFFIX in removed
    finally:
        holder.remove(force=True)
    removed, in_use = rv.sweep_stale()
    assert mount["Source"] in removed and in_use == []
