"""The benchmark's domains, one package each: every sub-package with a `domain`
module is a domain (`servers.registry` finds them here)."""
