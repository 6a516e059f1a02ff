"""Serving a written site on 127.0.0.1 only (never another interface): the
pages are the same static files `tbx view` writes; serving just saves the
file:// step, e.g. on a remote machine reached through an SSH tunnel.

Only files of the site (ROOT/view/...) and ROOT/report.html are served: the
run directory around them also holds states, attempts and verdicts with
expected values. The path is decided after percent-decoding, with `..`,
`.`, backslashes and NUL refused and symlinks resolved, so no spelling of a
path (`%2e%2e`, `%2f`, `..\\`) and no link inside the site reaches a file
outside it. Every request also passes bench.web_guard (loopback Host names
against DNS rebinding, no foreign Origin).
"""

from __future__ import annotations

import functools
import mimetypes
import shutil
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bench.web_guard import GuardPolicy, check_request

HOST = "127.0.0.1"
SITE = "view"
REPORT = "report.html"


def public_file(root: Path, raw_path: str) -> Path | None:
    """The file under `root` that the request path `raw_path` names, when it is the report
    or a file of the site (a directory means its index.html); None for anything else."""
    path = raw_path.split("?", 1)[0].split("#", 1)[0]
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return None
    if "\\" in decoded or "\x00" in decoded:
        return None
    parts = [p for p in decoded.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return None
    real_root = root.resolve()
    if parts == [REPORT]:
        allowed = (real_root / REPORT).resolve()
        target = allowed
    elif parts[:1] == [SITE]:
        allowed = (real_root / SITE).resolve()
        target = real_root.joinpath(*parts).resolve()
    else:
        return None
    if target.is_dir():
        target = (target / "index.html").resolve()
    if target != allowed and not target.is_relative_to(allowed):
        return None  # a symlink out of the site
    return target if target.is_file() else None


class _Handler(BaseHTTPRequestHandler):
    root: Path
    policy: GuardPolicy

    def __init__(self, *args: Any, root: Path, policy: GuardPolicy, **kwargs: Any):
        self.root, self.policy = root, policy
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _serve(self, body: bool) -> None:
        refusal = check_request(self.command, self.headers.items(), self.policy)
        if refusal is not None:
            self.send_error(refusal.status, explain=refusal.reason)
            return
        if self.path.split("?", 1)[0] in ("", "/"):
            self.send_response(302)
            self.send_header("Location", f"/{SITE}/index.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        target = public_file(self.root, self.path)
        if target is None:
            self.send_error(404)
            return
        try:
            f = target.open("rb")
        except OSError:
            self.send_error(404)
            return
        with f:
            size = target.stat().st_size
            self.send_response(200)
            self.send_header(
                "Content-Type", mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            )
            self.send_header("Content-Length", str(size))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if body:
                shutil.copyfileobj(f, self.wfile)

    def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise here
        pass


def make_server(root: Path, port: int = 0, policy: GuardPolicy | None = None) -> ThreadingHTTPServer:
    """A server for `root` (holding view/ and report.html) bound to 127.0.0.1:`port` (0: any
    free port), guarded by `policy` (default: loopback Host names, same origin); not yet serving."""
    handler = functools.partial(_Handler, root=root, policy=policy or GuardPolicy())
    return ThreadingHTTPServer((HOST, port), handler)
