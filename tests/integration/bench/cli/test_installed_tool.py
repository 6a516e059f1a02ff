"""tbx installed the way harnesses install tools: a wheel of the source tree (real pip,
build isolation as `pip install <path>` does it), installed not editable into a fresh
venv, and used from a directory that is not the repository (issue 35, item 5).

The fresh venv gets the wheel alone (`--no-deps`); the dependencies come from this
environment's site-packages through a plain path in a .pth file, which does not run the
editable-install hook there, so `bench`, `sandbox`, `servers` ... are the wheel's (checked).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox import IMAGES, image_tag, require_image
from sandbox.images import InputRoots, content_hash

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[4]
CHECKOUT = REPO.parent / "shared/benchmarks/thinkingbox-data"
PACKAGES = ("bench", "judge", "lazy_exports", "sandbox", "servers", "tbx")  # tbx: the Inspect extension
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# What a source tree holds besides the source: environments, caches, earlier builds, results.
NOT_SOURCE = {".venv", ".venv-openenv", ".venv-openenv10", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
NOT_SOURCE |= {".hypothesis", "build", "dist", "results", ".tbx", "tbx.egg-info"}


def _not_source(directory: str, names: list[str]) -> set[str]:
    top = Path(directory) == REPO
    return {n for n in names if n == "__pycache__" or (top and n in NOT_SOURCE)}


def _run(
    args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, check=False, cwd=cwd, env=env)


@dataclass(frozen=True)
class Installed:
    src: Path  # the copy of the source tree the wheel was built from (with its .git)
    wheel: Path
    python: Path
    site: Path  # the fresh venv's site-packages
    cwd: Path  # an empty directory, not the repository
    env: dict[str, str]  # no TBX_DATASET, no PYTHONPATH

    @property
    def demo(self) -> Path:
        return self.site / "bench" / "packs" / "demo"

    def tbx(self, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.python.with_name("tbx")), *args], cwd=self.cwd, env={**self.env, **extra_env})

    def python_json(self, code: str) -> object:
        out = _run([str(self.python), "-c", code], cwd=self.cwd, env=self.env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=_not_source, symlinks=True)
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(tmp / "dist")])
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("tbx-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)]
    done = _run(pip)
    assert done.returncode == 0, done.stderr[-3000:]
    site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    (site / "tbx_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cwd = tmp / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TBX_DATASET", "PYTHONPATH", "VIRTUAL_ENV")}
    return Installed(src=src, wheel=wheel, python=python, site=site, cwd=cwd, env=env)


def _files(root: Path, ignore: Callable[[Path], bool] = lambda p: "__pycache__" in p.parts) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not ignore(p)}


def test_the_wheel_holds_tbxs_packages_and_nothing_else(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    assert {n.split("/")[0] for n in names} == {*PACKAGES, f"tbx-{VERSION}.dist-info"}
    top_level = zipfile.ZipFile(installed.wheel).read(f"tbx-{VERSION}.dist-info/top_level.txt").decode()
    assert top_level.split() == list(PACKAGES)
    # the demo pack, every file whatever its suffix; the image inputs under sandbox/image_inputs/
    demo = installed.src / "bench" / "packs" / "demo"
    assert {
        n.removeprefix("bench/packs/demo/") for n in names if n.startswith("bench/packs/demo/")
    } == _files(demo)
    inputs = {n.removeprefix("sandbox/image_inputs/") for n in names if n.startswith("sandbox/image_inputs/")}
    assert inputs == {f"images/{f}" for f in _files(installed.src / "images")} | {"constraints.txt"}


def test_tbx_is_the_wheels_not_the_checkouts(installed: Installed) -> None:
    code = "import json, importlib; print(json.dumps([importlib.import_module(p).__file__ for p in {!r}]))"
    files = installed.python_json(code.format(PACKAGES))
    assert isinstance(files, list)
    assert all(Path(f).is_relative_to(installed.site) for f in files), files


def test_version_names_the_commit_the_wheel_was_built_from(installed: Installed) -> None:
    head = _run(["git", "-C", str(installed.src), "rev-parse", "HEAD"]).stdout.strip()
    out = installed.tbx("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"tbx {VERSION} (commit {head}") and len(out.stdout.splitlines()) == 1


def test_tasks_validate_the_installed_demo_pack(installed: Installed) -> None:
    out = installed.tbx("tasks", "validate", str(installed.demo))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[-1] == "15 tasks in release list, 15 test cases, 5 scenarios: OK"


def test_tasks_validate_a_thinkingbox_data_checkout(installed: Installed) -> None:
    out = installed.tbx("tasks", "validate", str(CHECKOUT))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(checked): 507 tasks, tbx runs 507" in out.stdout
    assert out.stdout.splitlines()[-1].startswith(
        "507 tasks in release list, 577 test cases, 10 scenarios: OK"
    )


@pytest.mark.parametrize(
    "args", [["tasks", "validate"], ["run", "--agent", "oracle", "--out", "out"]], ids=["validate", "run"]
)
def test_without_a_dataset_it_says_how_to_get_one(installed: Installed, args: list[str]) -> None:
    out = installed.tbx(*args)
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("tbx: no benchmark given: pass --dataset DIR or set TBX_DATASET=DIR.")
    assert "git clone https://github.com/microsoft/thinkingbox-data" in line
    assert f"--dataset {installed.demo}" in line  # the demo pack, where the installed tbx has it
    assert list(installed.cwd.iterdir()) == []


def test_the_installed_tbx_computes_the_checkouts_image_tags(installed: Installed) -> None:
    """Same source, same tags: images `make images` built are found by the installed tbx,
    and the other way round. The inputs also keep their modes (COPY keeps them)."""
    tags = installed.python_json(
        "import json; from sandbox.images import IMAGES, image_tag as t; print(json.dumps({n: t(n) for n in IMAGES}))"
    )
    checkout = InputRoots(data=installed.src, packages=installed.src)
    assert tags == {name: f"tbx/{name}:{content_hash(spec, checkout)}" for name, spec in IMAGES.items()}
    packaged = installed.site / "sandbox" / "image_inputs"
    for name in _files(installed.src / "images"):
        assert (packaged / "images" / name).stat().st_mode == (installed.src / "images" / name).stat().st_mode


@pytest.mark.docker
def test_the_installed_tbx_runs_the_demo_on_the_images_make_images_built(installed: Installed) -> None:
    tags = {name: image_tag(name) for name in IMAGES}  # this checkout's, as it is now
    for name in IMAGES:
        require_image(name)  # built by `make images` (fails with the hint when one is missing)
    built = installed.tbx("images", "build", TBX_KEEP_IMAGES="1")  # others' tags stay
    assert built.returncode == 0, built.stderr
    assert [line.split()[:2] for line in built.stdout.splitlines()] == [["reused", tags[n]] for n in IMAGES]
    out = installed.cwd / "run"
    run = installed.tbx(
        "run", "--dataset", str(installed.demo), "--agent", "oracle", "--repeat", "1", "--skip-rubrics",
        "--plain", "--out", "run",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 15 and all(r["passed"] and not r["system_error"] for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    # the sandbox images the run booted; the evaluator's runs only tasks graded by their test
    # function, which the demo pack has none of
    assert manifest["images"] == {n: tag for n, tag in tags.items() if n != "evaluator"}
    head = _run(["git", "-C", str(installed.src), "rev-parse", "HEAD"]).stdout.strip()
    assert manifest["git_commit"] == head  # the wheel's record, not some repository around it
