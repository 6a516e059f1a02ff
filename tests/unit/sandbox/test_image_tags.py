"""Image tags: content hashes, and the record that keeps a running tag from being pruned."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import images


def test_content_hash_follows_the_inputs(tmp_path: Path) -> None:
    roots = images.InputRoots(data=tmp_path, packages=tmp_path)
    dockerfile = tmp_path / "images" / "probe" / "Dockerfile"
    dockerfile.parent.mkdir(parents=True)
    dockerfile.write_text("FROM debian:bookworm-slim\n")
    (tmp_path / "extra.py").write_text("x = 1\n")
    spec = images.ImageSpec("probe", extra_inputs=("*.py",))
    before = images.content_hash(spec, roots)
    assert images.content_hash(spec, roots) == before and len(before) == 16
    dockerfile.write_text("FROM debian:bookworm-slim\nRUN true\n")
    after_dockerfile = images.content_hash(spec, roots)
    assert after_dockerfile != before
    (tmp_path / "extra.py").write_text("x = 2\n")
    assert images.content_hash(spec, roots) != after_dockerfile


def installed_layout(site: Path) -> images.InputRoots:
    """This checkout's image inputs laid out the way an installed wheel has them: the
    packages in site-packages, images/ and constraints.txt under sandbox/image_inputs/."""
    checkout = images.InputRoots(data=images.PACKAGES_ROOT, packages=images.PACKAGES_ROOT)
    data = site / "sandbox" / "image_inputs"
    for package in images.PACKAGE_INPUTS:  # servers/, judge/ (the evaluator's judge/yesno.py)
        shutil.copytree(checkout.packages / package, site / package)
    shutil.copytree(checkout.data / "images", data / "images")
    shutil.copy(checkout.data / "constraints.txt", data / "constraints.txt")
    (site / "servers" / "__pycache__").mkdir(exist_ok=True)
    (site / "servers" / "__pycache__" / "registry.cpython-311.pyc").write_bytes(b"compiled at install")
    return images.InputRoots(data=data, packages=site)


@pytest.mark.parametrize("name", sorted(images.IMAGES))
def test_an_installed_tbx_computes_the_checkouts_tags(name: str, tmp_path: Path) -> None:
    """Tags name inputs by their place in the source, not on disk: `make images` in a
    checkout and `tbx images build` of the installed wheel make (and find) the same tags."""
    checkout = images.InputRoots(data=images.PACKAGES_ROOT, packages=images.PACKAGES_ROOT)
    installed = installed_layout(tmp_path / "site-packages")
    spec = images.IMAGES[name]
    assert list(images.input_files(spec, installed)) == list(images.input_files(spec, checkout))
    assert images.content_hash(spec, installed) == images.content_hash(spec, checkout)
    # and each input really is read from the installed copy
    assert all(tmp_path in p.parents for p in images.input_files(spec, installed).values())


def test_the_installed_package_data_is_used_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert images.input_roots().data == images.PACKAGES_ROOT  # a checkout: its own files
    monkeypatch.setattr(images, "WHEEL_INPUTS", tmp_path / "image_inputs")
    (tmp_path / "image_inputs").mkdir()
    assert images.input_roots() == images.InputRoots(
        data=tmp_path / "image_inputs", packages=images.PACKAGES_ROOT
    )


def test_tags_in_use_are_those_of_live_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBX_CACHE", str(tmp_path))
    images.mark_in_use(["tbx/servers:aaaa"])
    images.mark_in_use(["tbx/postgres:bbbb"])  # a second resolve in the same process adds to it
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / "images-in-use" / f"{int(dead.stdout)}.json"
    stale.write_text(json.dumps(["tbx/servers:cccc"]))
    assert images.tags_in_use() == {"tbx/servers:aaaa", "tbx/postgres:bbbb"}
    assert not stale.exists(), "the record of an exited process is dropped"
