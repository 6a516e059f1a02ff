"""The ThinkingBox Session API (`tbx session-proxy`): the reference harness's
Session Proxy HTTP routes, each session one tbx attempt (see docs/session-api.md)."""
