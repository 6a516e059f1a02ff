"""Bad data is a usage error before anything starts: `tbx run`, `up`, `conformance`,
`env serve`, `session-proxy` and `tasks list` exit 2 with one line per problem, no
traceback, no output directory and no sandbox (the commands fail before reaching
Docker, so no daemon is needed to see it)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.dataset.checkout_seeds import toolslib_dir
from servers.registry import load_domain

REPO = Path(__file__).resolve().parents[4]
CHECKOUT = Path(os.environ.get("TBX_CHECKOUT", REPO.parent / "shared/benchmarks/thinkingbox-data"))
RETAIL_TASK = "sandbox_external_retail_group1.py:test_case_ST003_006"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err.splitlines()


def _checkout_with_servers_yaml(root: Path, servers_yaml: str) -> Path:
    """A checkout whose dataset and support are the real one's, with its own servers/."""
    root.mkdir()
    for name in ("dataset", "releases", "support"):
        (root / name).symlink_to(CHECKOUT / name)
    (root / "servers").mkdir()
    (root / "servers" / "servers.yaml").write_text(servers_yaml)
    return root


@pytest.mark.parametrize(
    ("servers_yaml", "why"),
    [
        (
            "servers:\n  airline_tau_bench: {type: mcp-sse, command: [x]}\n",
            "unknown type 'mcp-sse' (servers.yaml types: mcp-process, mcp-remote)",
        ),
        (
            "servers:\n  airline_tau_bench:\n    type: mcp-process\n"
            "    command: ['{python}', -m, thinkingbox_tools.mcp_airline_tau_bench]\n",
            "its package folder servers/thinkingbox_tools does not exist",
        ),
    ],
    ids=["unknown-type", "no-package-folder"],
)
def test_a_checkout_server_tbx_cannot_run_is_named_and_starts_nothing(
    servers_yaml: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _checkout_with_servers_yaml(tmp_path / "data", servers_yaml)
    out = tmp_path / "out"
    argv = ["run", "--dataset", str(root), "--release", "dataset_2604_airline_tau_bench"]
    code, lines = _run([*argv, "--agent", "oracle", "--out", str(out)], capsys)
    assert code == 2
    assert lines[0].startswith("tbx run: 1 problem in the benchmark data at ")
    assert (
        lines[1] == f"servers/servers.yaml: server 'airline_tau_bench' (21 tasks): tbx cannot run it: {why}"
    )
    assert len(lines) == 2
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--agent", "oracle", "--release", "nosuch"],
        ["tasks", "list", "--release", "nosuch"],
        ["env", "serve", "--config", "/dev/null", "--release", "nosuch"],
    ],
    ids=["run", "tasks-list", "env-serve"],
)
def test_an_unknown_release_is_an_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "tasks":
        argv = [*argv[:2], str(CHECKOUT), *argv[2:]]
    else:
        argv = [*argv, "--dataset", str(CHECKOUT), "--out", str(tmp_path / "out")]
    code, lines = _run(argv, capsys)
    assert code == 2
    assert any(line.startswith("releases: no release list 'nosuch' (found: ") for line in lines)
    assert not (tmp_path / "out").exists()


@pytest.fixture
def broken_checkout(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(CHECKOUT, root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    retail = load_domain("retail")
    seed = toolslib_dir(root, retail.server) / retail.seed_file("external_retail_toolset_oms_models_orders")
    seed.write_text(json.dumps({"rows": "not a list"})[:-3])
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--agent", "oracle", "--tasks", RETAIL_TASK],
        ["up", RETAIL_TASK],
        ["conformance", "--traces", str(REPO.parent / "shared/benchmarks/thinkingbox-bench-v1/traces")],
        ["session-proxy"],
    ],
    ids=["run", "up", "conformance", "session-proxy"],
)
def test_a_malformed_seed_file_is_named_before_any_sandbox(
    argv: list[str], broken_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--out", str(tmp_path / "out")] if argv[0] == "run" else []
    code, lines = _run([*argv, "--dataset", str(broken_checkout), *extra], capsys)
    assert code == 2
    assert "/external_retail_toolset/oms/initial_data/orders.json: cannot read JSON: " in lines[1]
    assert len(lines) == 2
    assert not (tmp_path / "out").exists()


def test_up_with_an_unknown_domain_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text("{}")
    code, lines = _run(["up", "--pg-seed", str(seed), "--domain", "nosuch"], capsys)
    assert code == 2
    assert lines == [
        "tbx: unknown domain 'nosuch'; known: auto_insurance, consulting, neobank, retail, travel"
    ]


def test_an_unwritable_out_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    pack = REPO / "bench/packs/demo"
    code, lines = _run(
        ["run", "--dataset", str(pack), "--agent", "oracle", "--out", str(blocker / "out")], capsys
    )
    assert code == 1
    assert lines == [f"tbx: {blocker / 'out'}: Not a directory"]
