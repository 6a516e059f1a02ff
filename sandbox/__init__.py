"""Per-attempt isolation: images, container sets, the tool proxy, the warm
pool, the provider interface and the sweeper.

    from sandbox import DockerProvider, ProxyServer, SandboxRequest

The public names, everything other parts use, are listed in `__all__`: import
them from here, never from the submodules (tests/unit/test_import_rules.py).
No public name equals a submodule's (the submodule would shadow it: hence
`sandbox.docker_api` holds `docker_client()`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazy_exports import lazy_exports

if TYPE_CHECKING:
    from sandbox.admission import (
        MIB,
        Admission,
        AdmissionError,
        SetUsage,
        admit,
        available_memory,
        cached_usage,
        default_warm,
        measure_set,
        reserve_for,
        sets_that_fit,
        store_usage,
    )
    from sandbox.backoff import (
        backoff_delay,
        exponential_backoff,
    )
    from sandbox.cache import (
        cache_dir,
    )
    from sandbox.checkout import (
        LOSS_GRACE,
        lost_after,
        lost_container,
        lost_fate_of,
        open_sandbox,
        register_request,
    )
    from sandbox.checkout_server import (
        CheckoutServer,
        check_server,
        check_tools,
        server_effects,
    )
    from sandbox.docker_api import (
        docker_client,
    )
    from sandbox.errors import (
        CheckoutServerError,
        CheckoutTimeout,
        ContainerLostError,
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
        IMAGES,
        CheckoutPackage,
        build_checkout_image,
        build_image,
        image_tag,
        prune_in_use_records,
        prune_stale,
        require_image,
    )
    from sandbox.labels import (
        NODE_ENV,
        ORPHAN_TTL,
        labels_for,
        new_id,
    )
    from sandbox.pool import (
        SandboxPool,
    )
    from sandbox.postgres import (
        PgEndpoint,
    )
    from sandbox.preparer import (
        Preparer,
        TypesenseEndpoint,
    )
    from sandbox.provider import (
        DockerProvider,
        SandboxLease,
        SandboxProvider,
        Upcoming,
        image_digests,
        ping_daemon,
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
    from sandbox.proxy.loss import (
        Loss,
        agent_load,
    )
    from sandbox.proxy.models import (
        ProxyCall,
        ProxyError,
        RegisterRequest,
        Registration,
        ResourceLimitHit,
        SandboxGoneError,
        ToolPolicy,
        Upstream,
    )
    from sandbox.proxy.relay import (
        UNICODE_PROBLEM,
        UpstreamPool,
        sendable,
    )
    from sandbox.proxy.routes import (
        RESERVED_PREFIX,
    )
    from sandbox.proxy.server import (
        ProxyServer,
    )
    from sandbox.runtime_volumes import (
        prune_locks,
        sweep_stale,
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
    from sandbox.tls import (
        client_ssl_context,
    )

# name -> the module that defines it; imported on first use, so `import sandbox`
# (and its light submodules) stays cheap for the command line. The
# TYPE_CHECKING block above names the same (tests/unit/test_import_rules.py).
_EXPORTS: dict[str, str] = {
    "AdminClient": "sandbox.proxy.admin",
    "Admission": "sandbox.admission",
    "AdmissionError": "sandbox.admission",
    "AsyncSandbox": "sandbox.sandbox",
    "AttemptHandle": "sandbox.sandbox",
    "CAUSES": "sandbox.faults",
    "CONTAINER_FAULT": "sandbox.faults",
    "Cause": "sandbox.faults",
    "CheckoutPackage": "sandbox.images",
    "CheckoutServer": "sandbox.checkout_server",
    "CheckoutServerError": "sandbox.errors",
    "CheckoutTimeout": "sandbox.errors",
    "ContainerLostError": "sandbox.errors",
    "ContainerStartError": "sandbox.errors",
    "DEFAULT_CALL_TIMEOUT": "sandbox.proxy.limits",
    "DEFAULT_MAX_REQUEST_BYTES": "sandbox.proxy.limits",
    "DockerProvider": "sandbox.provider",
    "DockerUnavailableError": "sandbox.errors",
    "Fault": "sandbox.faults",
    "IMAGES": "sandbox.images",
    "ImageMissingError": "sandbox.errors",
    "LOSS_GRACE": "sandbox.checkout",
    "Limits": "sandbox.services",
    "Loss": "sandbox.proxy.loss",
    "MAX_ARGUMENT_BYTES": "sandbox.proxy.limits",
    "MCP_HTTP_TIMEOUT": "sandbox.proxy.clients",
    "MIB": "sandbox.admission",
    "NODE_ENV": "sandbox.labels",
    "NODE_FAULT": "sandbox.faults",
    "NetworkPoolExhaustedError": "sandbox.errors",
    "ORPHAN_TTL": "sandbox.labels",
    "OTHER_FAULT": "sandbox.faults",
    "PgEndpoint": "sandbox.postgres",
    "Preparer": "sandbox.preparer",
    "ProxyCall": "sandbox.proxy.models",
    "ProxyError": "sandbox.proxy.models",
    "ProxyServer": "sandbox.proxy.server",
    "RESERVED_PREFIX": "sandbox.proxy.routes",
    "RegisterRequest": "sandbox.proxy.models",
    "Registration": "sandbox.proxy.models",
    "ResourceLimitHit": "sandbox.proxy.models",
    "SANDBOX_TIMEOUTS": "sandbox.timeouts",
    "Sandbox": "sandbox.sandbox",
    "SandboxError": "sandbox.errors",
    "SandboxGoneError": "sandbox.proxy.models",
    "SandboxLease": "sandbox.provider",
    "SandboxPool": "sandbox.pool",
    "SandboxProvider": "sandbox.provider",
    "SandboxRequest": "sandbox.sandbox",
    "SandboxTimeouts": "sandbox.timeouts",
    "SeedError": "sandbox.errors",
    "SetUsage": "sandbox.admission",
    "SweepResult": "sandbox.sweeper",
    "ToolPolicy": "sandbox.proxy.models",
    "TypesenseEndpoint": "sandbox.preparer",
    "UNICODE_PROBLEM": "sandbox.proxy.relay",
    "Upcoming": "sandbox.provider",
    "Upstream": "sandbox.proxy.models",
    "UpstreamPool": "sandbox.proxy.relay",
    "admit": "sandbox.admission",
    "agent_load": "sandbox.proxy.loss",
    "available_memory": "sandbox.admission",
    "backoff_delay": "sandbox.backoff",
    "build_checkout_image": "sandbox.images",
    "build_image": "sandbox.images",
    "cache_dir": "sandbox.cache",
    "cached_usage": "sandbox.admission",
    "client_ssl_context": "sandbox.tls",
    "default_warm": "sandbox.admission",
    "docker_client": "sandbox.docker_api",
    "check_server": "sandbox.checkout_server",
    "check_tools": "sandbox.checkout_server",
    "exponential_backoff": "sandbox.backoff",
    "image_digests": "sandbox.provider",
    "image_tag": "sandbox.images",
    "leftovers": "sandbox.sweeper",
    "list_all_tools": "sandbox.proxy.clients",
    "lost_after": "sandbox.checkout",
    "lost_container": "sandbox.checkout",
    "lost_fate_of": "sandbox.checkout",
    "measure_set": "sandbox.admission",
    "new_id": "sandbox.labels",
    "open_sandbox": "sandbox.checkout",
    "over_the_cap": "sandbox.proxy.caps",
    "ping_daemon": "sandbox.provider",
    "proxy_client": "sandbox.proxy.clients",
    "prune_in_use_records": "sandbox.images",
    "prune_locks": "sandbox.runtime_volumes",
    "prune_stale": "sandbox.images",
    "recorded_argument_text": "sandbox.proxy.caps",
    "register_request": "sandbox.checkout",
    "require_image": "sandbox.images",
    "reserve_for": "sandbox.admission",
    "resolve_images": "sandbox.sandbox",
    "sendable": "sandbox.proxy.relay",
    "sets_that_fit": "sandbox.admission",
    "store_usage": "sandbox.admission",
    "server_effects": "sandbox.checkout_server",
    "sweep": "sandbox.sweeper",
    "labels_for": "sandbox.labels",
    "sweep_stale": "sandbox.runtime_volumes",
    "upstream_client": "sandbox.proxy.clients",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
