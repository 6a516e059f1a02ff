"""One TLS context for the HTTP clients tbx makes per sandbox and per attempt.

httpx builds a new verifying context for every client, loading the whole CA
bundle: ~10 ms of CPU each (py-spy, benchmarks/attempt_cpu.py: 11 % of tbx's
process during model attempts, for four clients per attempt that only ever
speak plain HTTP to containers). A context is safe to share between clients
and threads, so it is made once, the way httpx would make it (certifi's bundle,
or SSL_CERT_FILE / SSL_CERT_DIR when set)."""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ["client_ssl_context"]


@functools.cache
def client_ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()
