"""Recorded data made safe to print on a terminal: the one helper every printer
of tbx uses for strings it did not write itself (task and session ids, run
labels, signatures, error texts, model names, paths).

Such strings come from datasets, result files and clients (a Session API
client picks its session id), so they may hold control characters: ESC
starts sequences that clear the screen, recolour it or retitle the window; a
newline or carriage return forges or hides lines; bidi overrides reorder what
is shown. Each such character is shown as its escape (`\\x1b`, `\\n`,
`\\u202e`), so the text reads as the characters it holds, on one line.
HTML outputs escape with `html.escape` instead; JSON output is escaped by
`json.dumps`.
"""

from __future__ import annotations

import re

__all__ = ["printable", "printable_lines"]

# C0 controls, DEL, C1 controls (0x9b is an 8-bit CSI), line and paragraph
# separators, and the bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`value` as text with every control character shown as its escape (see the module)."""
    return _UNSAFE.sub(_escape, str(value))


def printable_lines(value: object) -> str:
    """`printable` for a message tbx wrote as several lines (one problem per line): its line
    breaks are kept, every other control character is escaped."""
    return "\n".join(printable(line) for line in str(value).split("\n"))
