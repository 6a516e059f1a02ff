"""tbx's stand-in for the package ThinkingBox task files import, written from the
specification (thinkingbox-test-functions.md), for the evaluator sandbox only."""
