"""The `tbx` command line: `main` parses and dispatches; one module per command."""

from bench.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
