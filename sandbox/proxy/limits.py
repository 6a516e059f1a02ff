"""The tool proxy's limits, in one place: read by the registry, the server,
the call paths and the command line (for its option defaults); docs/sandbox.md,
"Per-call limits", says what each one does to an agent that passes it.

The two per-call caps keep one agent from filling memory or disk for everyone:
every call's arguments are held by the proxy and written to the attempt's
records, every reply is relayed to the agent (and into its model's context),
held and written the same way. Golden calls of ThinkingBox-Bench v1.0 send at
most ~1 KiB of arguments and get at most ~4 KiB back, so the caps are far
above any task's need and far below what exhausts a 512 MiB container.
"""

from __future__ import annotations

from sandbox.timeouts import SANDBOX_TIMEOUTS

# seconds one tool call may take before it is answered as timed out (sandbox.timeouts)
DEFAULT_CALL_TIMEOUT = SANDBOX_TIMEOUTS.call
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024  # larger agent requests are refused (413)
DEFAULT_CONNECT_TIMEOUT = 15.0  # seconds registration waits for the upstream servers to answer
# A call whose arguments (as compact UTF-8 JSON) are larger is refused before it reaches
# its server, with a tool error the agent can read; its record keeps a marker, not them.
MAX_ARGUMENT_BYTES = 64 * 1024
# A reply's text beyond this many UTF-8 bytes is cut, with a marker naming the original
# size, before it is relayed and recorded.
MAX_REPLY_BYTES = 256 * 1024
