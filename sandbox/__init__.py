"""Per-attempt isolation: images, container sets, the tool proxy, the warm
pool, the provider interface and the sweeper.

    from sandbox import DockerProvider, ProxyServer, SandboxRequest

The public names are listed in `__all__`; import them from here rather than
from the submodules. (`docker_client()` stays in `sandbox.docker_client`: a
name equal to its submodule's would be shadowed by the submodule.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazy_exports import lazy_exports

if TYPE_CHECKING:
    from sandbox.backoff import (
        backoff_delay,
        exponential_backoff,
    )
    from sandbox.checkout import (
        open_sandbox,
        register_request,
    )
    from sandbox.checkout_server import (
        CheckoutServer,
        check_server,
        server_effects,
    )
    from sandbox.errors import (
        CheckoutServerError,
        CheckoutTimeout,
        ContainerStartError,
        DockerUnavailableError,
        ImageMissingError,
        NetworkPoolExhaustedError,
        SandboxError,
        SeedError,
    )
    from sandbox.faults import (
        CAUSES,
        CONTAINER_FAULT,
        NODE_FAULT,
        OTHER_FAULT,
        Cause,
        Fault,
    )
    from sandbox.images import (
        CheckoutPackage,
        build_checkout_image,
        build_image,
        image_tag,
        require_image,
    )
    from sandbox.labels import (
        new_id,
    )
    from sandbox.pool import (
        SandboxPool,
    )
    from sandbox.postgres import (
        PgEndpoint,
    )
    from sandbox.provider import (
        DockerProvider,
        SandboxLease,
        SandboxProvider,
    )
    from sandbox.proxy.admin import (
        AdminClient,
    )
    from sandbox.proxy.caps import (
        over_the_cap,
        recorded_argument_text,
    )
    from sandbox.proxy.clients import (
        MCP_HTTP_TIMEOUT,
        list_all_tools,
        proxy_client,
        upstream_client,
    )
    from sandbox.proxy.limits import (
        DEFAULT_CALL_TIMEOUT,
        DEFAULT_MAX_REQUEST_BYTES,
        MAX_ARGUMENT_BYTES,
    )
    from sandbox.proxy.models import (
        ProxyCall,
        ProxyError,
        RegisterRequest,
        Registration,
        SandboxGoneError,
        ToolPolicy,
        Upstream,
    )
    from sandbox.proxy.server import (
        ProxyServer,
    )
    from sandbox.sandbox import (
        AsyncSandbox,
        AttemptHandle,
        Sandbox,
        SandboxRequest,
        resolve_images,
    )
    from sandbox.services import (
        Limits,
    )
    from sandbox.sweeper import (
        SweepResult,
        leftovers,
        sweep,
    )
    from sandbox.timeouts import (
        SANDBOX_TIMEOUTS,
        SandboxTimeouts,
    )

# name -> the module that defines it; imported on first use, so `import sandbox`
# (and its light submodules) stays cheap for the command line. The
# TYPE_CHECKING block above names the same (tests/unit/test_import_rules.py).
_EXPORTS: dict[str, str] = {
    "AdminClient": "sandbox.proxy.admin",
    "AsyncSandbox": "sandbox.sandbox",
    "AttemptHandle": "sandbox.sandbox",
    "CAUSES": "sandbox.faults",
    "CONTAINER_FAULT": "sandbox.faults",
    "Cause": "sandbox.faults",
    "CheckoutPackage": "sandbox.images",
    "CheckoutServer": "sandbox.checkout_server",
    "CheckoutServerError": "sandbox.errors",
    "CheckoutTimeout": "sandbox.errors",
    "ContainerStartError": "sandbox.errors",
    "DEFAULT_CALL_TIMEOUT": "sandbox.proxy.limits",
    "DEFAULT_MAX_REQUEST_BYTES": "sandbox.proxy.limits",
    "DockerProvider": "sandbox.provider",
    "DockerUnavailableError": "sandbox.errors",
    "Fault": "sandbox.faults",
    "ImageMissingError": "sandbox.errors",
    "Limits": "sandbox.services",
    "MAX_ARGUMENT_BYTES": "sandbox.proxy.limits",
    "MCP_HTTP_TIMEOUT": "sandbox.proxy.clients",
    "NetworkPoolExhaustedError": "sandbox.errors",
    "NODE_FAULT": "sandbox.faults",
    "OTHER_FAULT": "sandbox.faults",
    "PgEndpoint": "sandbox.postgres",
    "ProxyCall": "sandbox.proxy.models",
    "ProxyError": "sandbox.proxy.models",
    "ProxyServer": "sandbox.proxy.server",
    "RegisterRequest": "sandbox.proxy.models",
    "Registration": "sandbox.proxy.models",
    "Sandbox": "sandbox.sandbox",
    "SandboxError": "sandbox.errors",
    "SandboxGoneError": "sandbox.proxy.models",
    "SandboxPool": "sandbox.pool",
    "SandboxProvider": "sandbox.provider",
    "SandboxRequest": "sandbox.sandbox",
    "SandboxLease": "sandbox.provider",
    "SANDBOX_TIMEOUTS": "sandbox.timeouts",
    "SandboxTimeouts": "sandbox.timeouts",
    "SeedError": "sandbox.errors",
    "SweepResult": "sandbox.sweeper",
    "ToolPolicy": "sandbox.proxy.models",
    "Upstream": "sandbox.proxy.models",
    "backoff_delay": "sandbox.backoff",
    "build_checkout_image": "sandbox.images",
    "build_image": "sandbox.images",
    "check_server": "sandbox.checkout_server",
    "exponential_backoff": "sandbox.backoff",
    "image_tag": "sandbox.images",
    "leftovers": "sandbox.sweeper",
    "list_all_tools": "sandbox.proxy.clients",
    "new_id": "sandbox.labels",
    "open_sandbox": "sandbox.checkout",
    "over_the_cap": "sandbox.proxy.caps",
    "proxy_client": "sandbox.proxy.clients",
    "recorded_argument_text": "sandbox.proxy.caps",
    "register_request": "sandbox.checkout",
    "require_image": "sandbox.images",
    "resolve_images": "sandbox.sandbox",
    "server_effects": "sandbox.checkout_server",
    "sweep": "sandbox.sweeper",
    "upstream_client": "sandbox.proxy.clients",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
