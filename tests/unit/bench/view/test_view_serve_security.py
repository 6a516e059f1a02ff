"""`tbx view --serve` as a hostile client sees it: a real server on 127.0.0.1
and raw requests sent byte for byte (a socket: httpx and urllib normalise
`..` and `%2e` away before sending), for every spelling of a path out of the
site, symlinks out of it, and the Host/Origin guard."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.view.serve import make_server, public_file
from bench.web_guard import GuardPolicy

SECRET = b'{"expected": "the golden value"}'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A run directory as `tbx view` leaves it: the site, the report, and private files around them."""
    run = tmp_path / "run"
    (run / "view" / "tasks").mkdir(parents=True)
    (run / "view" / "index.html").write_text("<html>index</html>")
    (run / "view" / "tasks" / "t1.html").write_text("<html>task</html>")
    (run / "report.html").write_text("<html>report</html>")
    (run / "manifest.json").write_bytes(SECRET)
    (run / "attempts").mkdir()
    (run / "attempts" / "a1.json").write_bytes(SECRET)
    (tmp_path / "outside.json").write_bytes(SECRET)
    (run / "view" / "tasks" / "link.json").symlink_to(run / "manifest.json")
    (run / "view" / "states").symlink_to(run / "attempts", target_is_directory=True)
    (run / "view" / "inside.html").symlink_to(run / "view" / "tasks" / "t1.html")
    return run


@pytest.fixture
def port(root: Path, request: pytest.FixtureRequest) -> Iterator[int]:
    server = make_server(root, 0, getattr(request, "param", None))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def get(port: int, target: str, headers: str | None = None) -> tuple[int, bytes]:
    """GET `target` exactly as written; (status, body)."""
    head = headers if headers is not None else f"Host: 127.0.0.1:{port}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split(b" ", 2)[1]), rest.partition(b"\r\n\r\n")[2]


OUT_OF_THE_SITE = [
    "/view/%2e%2e/manifest.json",
    "/view/%2E%2E/manifest.json",
    "/view/.%2e/manifest.json",
    "/view/../manifest.json",
    "/view%2f..%2fmanifest.json",
    "/view/%2e%2e%2fmanifest.json",
    "/view/..%5cmanifest.json",
    "/view\\..\\manifest.json",
    "/view/tasks/%2e%2e/%2e%2e/attempts/a1.json",
    "/view/%2e%2e/attempts/",
    "/view/%2e%2e/",
    "/view/%2e%2e/%2e%2e/outside.json",
    "/view/tasks/link.json",  # a symlink to the manifest
    "/view/states/a1.json",  # a directory symlink to attempts/
    "/view/states/",
    "/view/%00/../manifest.json",
    "/view/%ff%fe",
    "/manifest.json",
    "/attempts/a1.json",
    "//manifest.json",
    "/report.html/../manifest.json",
]


@pytest.mark.parametrize("target", OUT_OF_THE_SITE)
def test_no_spelling_of_a_path_reaches_a_file_outside_the_site(port: int, target: str) -> None:
    status, body = get(port, target)
    assert status == 404, (target, body)
    assert b"golden" not in body


def test_the_site_and_the_report_are_served(port: int) -> None:
    assert get(port, "/view/index.html") == (200, b"<html>index</html>")
    assert get(port, "/view/") == (200, b"<html>index</html>")
    assert get(port, "/view/tasks/t1.html?x=1") == (200, b"<html>task</html>")
    assert get(port, "/view/%74asks/t1.html") == (200, b"<html>task</html>")  # an encoded letter is fine
    assert get(port, "/view/inside.html") == (200, b"<html>task</html>")  # a link inside the site
    assert get(port, "/report.html") == (200, b"<html>report</html>")
    assert get(port, "/")[0] == 302


def test_the_directory_is_not_listed(port: int, root: Path) -> None:
    (root / "view" / "tasks" / "index.html").unlink(missing_ok=True)
    status, body = get(port, "/view/tasks/")
    assert status == 404
    assert b"t1.html" not in body


def test_a_foreign_host_or_origin_is_refused(port: int) -> None:
    status, body = get(port, "/view/index.html", "Host: evil.example\r\n")
    assert status == 421
    assert b"index" not in body
    status, _ = get(port, "/view/index.html", f"Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n")
    assert status == 403
    assert get(port, "/view/index.html", f"Host: localhost:{port}\r\n")[0] == 200


@pytest.mark.parametrize("port", [GuardPolicy(allowed_hosts=("viewer.internal",))], indirect=True)
def test_an_allowed_host_is_served(port: int) -> None:
    assert get(port, "/view/index.html", "Host: viewer.internal\r\n") == (200, b"<html>index</html>")
    assert get(port, "/view/index.html", "Host: other.internal\r\n")[0] == 421


def test_public_file_never_leaves_the_site(root: Path) -> None:
    assert public_file(root, "/view/tasks/t1.html") == (root / "view" / "tasks" / "t1.html").resolve()
    for target in OUT_OF_THE_SITE:
        found = public_file(root, target)
        assert found is None or found.is_relative_to((root / "view").resolve()), target


def test_a_bad_allow_host_is_a_clear_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(root), "--no-report", "--serve", "--allow-host", "http://x"]) == 2
    assert "without scheme or port" in capsys.readouterr().err
