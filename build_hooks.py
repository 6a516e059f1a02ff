"""setuptools hooks for tbx's wheel (pyproject.toml, [tool.setuptools.cmdclass]).

An installed tbx builds its images and says which commit it is without a source tree,
so the wheel carries two things beside tbx's packages (the demo pack is package data):

- sandbox/image_inputs/: images/ (the build contexts) and constraints.txt, under the
  names they have in a checkout; sandbox/images.py finds them there and hashes those
  names into the tags, so the tags are the checkout's.
- bench/build_info.json: the commit the wheel was built from, and whether the tree was
  modified (read by bench/version.py, found by bench/source_commit.py).

Nothing is written into the source tree. An sdist carries build_info.json at its root,
so a wheel built from it (`python -m build`) still knows the commit.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
IMAGE_INPUTS = ("images", "constraints.txt")  # as sandbox/image_inputs/<name> (sandbox/images.py)
BUILD_INFO = "build_info.json"


def build_info(root: Path) -> dict[str, Any]:
    recorded = root / BUILD_INFO  # an unpacked sdist's
    if recorded.is_file():
        return dict(json.loads(recorded.read_text()))
    # bench/source_commit.py is standard library only: loaded from the tree being built.
    spec = importlib.util.spec_from_file_location("tbx_source_commit", root / "bench" / "source_commit.py")
    assert spec is not None and spec.loader is not None
    git = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(git)
    commit = git.head_commit(root)
    return {"commit": commit, "modified": commit is not None and git.is_modified(root)}


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the checkout, which has all of it
        lib = Path(self.build_lib)
        inputs = lib / "sandbox" / "image_inputs"
        shutil.rmtree(inputs, ignore_errors=True)  # build/ may hold a previous build's files
        for name in IMAGE_INPUTS:
            src = ROOT / name
            if src.is_dir():  # copies keep the mode bits: the images' COPY keeps them too
                shutil.copytree(src, inputs / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                inputs.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, inputs / name)
        (lib / "bench" / BUILD_INFO).write_text(json.dumps(build_info(ROOT)) + "\n")


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        (Path(base_dir) / BUILD_INFO).write_text(json.dumps(build_info(ROOT)) + "\n")
