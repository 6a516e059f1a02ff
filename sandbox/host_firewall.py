"""Keep attempt containers away from the host's own services.

An `internal` Docker network has no route to the outside world, but Docker
20.10 still lets its containers open connections to the host through the
bridge (its gateway address, docker0, ...). tbx names every attempt bridge
`tbx-<hex>` and drops NEW connections that arrive on such an interface;
replies to connections the host opens (seeding, MCP, the judge's dump) are
ESTABLISHED and pass.
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess

from sandbox.errors import SandboxError

log = logging.getLogger(__name__)

BRIDGE_PREFIX = "tbx-"
RULE = ["INPUT", "-i", f"{BRIDGE_PREFIX}+", "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"]


def bridge_name(attempt_id: str) -> str:
    """A Linux interface name (<= 15 characters) for an attempt's bridge."""
    return BRIDGE_PREFIX + attempt_id.rsplit("-", 1)[-1][:11]


@functools.cache
def ensure_host_guard() -> None:
    """Install the host rule once per process (idempotent across processes)."""
    iptables = shutil.which("iptables")
    if iptables is None:
        raise SandboxError(
            "iptables is not installed: tbx needs it to stop attempt containers from reaching host "
            "services (apt-get install iptables)"
        )
    if subprocess.run([iptables, "-C", *RULE], capture_output=True).returncode == 0:
        return
    proc = subprocess.run([iptables, "-I", *RULE], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(
            f"could not install the host firewall rule `iptables -I {' '.join(RULE)}` "
            f"({proc.stderr.strip()}); run tbx as root or install the rule yourself"
        )
    log.info("installed host rule: iptables -I %s", " ".join(RULE))
