"""The session proxy's default limits, read by the registry and the server
(and by the command line for its option defaults)."""

from __future__ import annotations

DEFAULT_CALL_TIMEOUT = 60.0  # seconds one tool call may take before it is answered as timed out
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024  # larger agent requests are refused (413)
DEFAULT_CONNECT_TIMEOUT = 15.0  # seconds registration waits for the upstream servers to answer
