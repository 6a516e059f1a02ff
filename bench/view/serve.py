"""Serving a written site on 127.0.0.1 only (never another interface): the
pages are the same static files `tbx view` writes; serving just saves the
file:// step, e.g. on a remote machine reached through an SSH tunnel."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


class _Handler(SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        # Only the site and the report: the run directory around them also holds states.
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path in ("", "/"):
            self.send_response(302)
            self.send_header("Location", "/view/index.html")
            self.end_headers()
            return
        public = path == "/report.html" or path.startswith("/view/")
        if ".." in path or not public:
            self.send_error(404)
            return
        super().do_GET()

    def do_HEAD(self) -> None:
        self.do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise here
        pass


def make_server(root: Path, port: int = 0) -> ThreadingHTTPServer:
    """A server for `root` (holding view/ and report.html) bound to 127.0.0.1:`port` (0: any free port); not yet serving."""
    handler = functools.partial(_Handler, directory=str(root))
    return ThreadingHTTPServer((HOST, port), handler)
