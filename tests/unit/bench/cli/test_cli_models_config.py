"""A models config's problems (an unknown key, a key the endpoint needs) are one-line usage
errors of `tbx run` and `tbx env serve` (exit 2) before anything is written; an endpoint that
is down is one line too. No Docker is reached (issue 43, item 1)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_like import LlamaLike

from bench.cli.main import main

DEMO = Path(__file__).resolve().parents[4] / "bench/packs/demo"  # small: loads in a blink


@pytest.fixture
def server() -> Iterator[LlamaLike]:
    srv = LlamaLike().start()
    yield srv
    srv.stop()


def config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(
        f"defaults:\n  base_url: {base_url}\n  api_key_env: TBX_TEST_UNSET_KEY\n  timeout: 5\n{extra}"
        "agent:\n  model: a\nuser:\n  model: u\njudge:\n  model: j\n"
    )
    return path


def run(
    tmp_path: Path, cfg: Path, capsys: pytest.CaptureFixture[str], *, serve: bool = False
) -> tuple[int, list[str]]:
    out = tmp_path / "out"
    if serve:
        argv = ["env", "serve", "--config", str(cfg), "--dataset", str(DEMO)]
    else:
        argv = [
            "run",
            "--config",
            str(cfg),
            "--dataset",
            str(DEMO),
            "--agent",
            "llm",
        ]
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not out.exists()  # nothing written
    return code, err.splitlines()


@pytest.mark.parametrize("serve", [False, True], ids=["run", "env-serve"])
def test_an_unknown_key_names_the_key_and_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], serve: bool
) -> None:
    cfg = config(tmp_path, "http://127.0.0.1:9/v1", extra="  max_token: 512\n")
    code, lines = run(tmp_path, cfg, capsys, serve=serve)
    assert code == 2 and len(lines) == 1
    assert str(cfg) in lines[0] and "unknown key 'max_token'" in lines[0]
    assert "did you mean 'max_tokens'?" in lines[0]


@pytest.mark.parametrize("serve", [False, True], ids=["run", "env-serve"])
def test_the_hosted_api_without_its_key_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, serve: bool
) -> None:
    monkeypatch.delenv("TBX_TEST_UNSET_KEY", raising=False)
    code, lines = run(tmp_path, config(tmp_path, "https://api.openai.com/v1"), capsys, serve=serve)
    assert code == 2 and len(lines) == 1
    assert "TBX_TEST_UNSET_KEY (api_key_env) is not set" in lines[0]


def test_an_endpoint_refusing_the_missing_key_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, server: LlamaLike
) -> None:
    monkeypatch.delenv("TBX_TEST_UNSET_KEY", raising=False)
    server.key = "wanted"
    code, lines = run(tmp_path, config(tmp_path, server.url), capsys)
    assert code == 2 and len(lines) == 1
    assert "HTTP 401" in lines[0] and "TBX_TEST_UNSET_KEY (api_key_env) is not set" in lines[0]


def test_a_down_endpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, lines = run(tmp_path, config(tmp_path, f"http://127.0.0.1:{port}/v1"), capsys)
    assert code == 1 and len(lines) == 1
    assert "cannot reach 127.0.0.1:" in lines[0] and "is the model server running" in lines[0]
