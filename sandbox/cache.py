"""Where tbx keeps what it caches on this host: `$TBX_CACHE`, by default
`$XDG_CACHE_HOME/tbx` or ~/.cache/tbx (admission, images, runtime volumes, golden states)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir(*parts: str) -> Path:
    """`$TBX_CACHE/<parts>` (not created here)."""
    root = os.environ.get("TBX_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tbx"
    )
    return Path(root, *parts)
