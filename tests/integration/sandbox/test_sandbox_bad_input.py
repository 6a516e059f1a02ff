"""Bad input gets a clear error and leaves nothing running: no Docker daemon, a
missing image, seed rows the database would silently lose."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import sandbox.images
from bench.prepare import TaskPreparation, seeded_request
from sandbox import ImageMissingError, Sandbox, SandboxRequest, SeedError, leftovers, resolve_images

pytestmark = pytest.mark.docker

ORDERS = "external_retail_toolset_oms_models_orders"  # its model forbids extra fields


def test_unreachable_docker_daemon_exits_2_naming_the_daemon(
    retail_seed_file: Path, spawn: Any, tbx: str
) -> None:
    # A subprocess: sandbox.docker_api.docker_client is functools.cache'd in this one.
    proc = spawn(
        [tbx, "up", "--pg-seed", str(retail_seed_file), "--no-typesense"], DOCKER_HOST="unix:///nonexistent"
    )
    assert proc.finish(60) == 2, proc.err
    err = proc.err
    assert "Traceback" not in err
    assert err.startswith("tbx: cannot reach the Docker daemon")
    assert "DOCKER_HOST" in err and "then retry" in err


@pytest.mark.parametrize("missing", ["postgres", "servers", "typesense"])
def test_missing_image_names_the_build_command(
    monkeypatch: pytest.MonkeyPatch, base_images: Any, retail_rows: Any, run_id: str, missing: str
) -> None:
    real = sandbox.images.image_tag

    def image_tag(name: str) -> str:
        return f"tbx/{name}:0000000000000000" if name == missing else real(name)

    monkeypatch.setattr(sandbox.images, "image_tag", image_tag)
    request = seeded_request({"retail": retail_rows}, domains=["retail"], typesense=True, run_id=run_id)
    with pytest.raises(ImageMissingError) as err:
        Sandbox(request).start()
    message = str(err.value)
    assert f"tbx/{missing}:0000000000000000" in message
    assert "make images" in message and f"tbx images build {missing}" in message
    assert leftovers(run_id) == ([], [])


def _start_fails(request: SandboxRequest) -> str:
    with pytest.raises(SeedError) as err, Sandbox(request):
        pass
    assert leftovers(request.run_id) == ([], [])
    return str(err.value)


def test_unknown_column_in_a_strict_table_is_rejected(
    base_images: Any, retail_rows: Any, run_id: str
) -> None:
    rows = copy.deepcopy(retail_rows)
    rows[ORDERS][1]["loyalty_hint"] = "x"
    message = _start_fails(
        seeded_request({"retail": rows}, domains=["retail"], typesense=False, run_id=run_id)
    )
    assert ORDERS in message and "loyalty_hint" in message and "row 1" in message


def test_unknown_column_in_a_lenient_table_is_not_an_error(retail_rows: Any) -> None:
    """Zendesk tables ignore extra fields (as the reference's models do)."""
    rows = copy.deepcopy(retail_rows)
    rows["zendesk_tickets"][0]["loyalty_hint"] = "x"
    TaskPreparation(rows={"retail": rows}).check(["retail"])


def test_unknown_table_or_domain_in_the_seed_is_rejected(
    base_images: Any, retail_rows: Any, run_id: str
) -> None:
    rows = {**retail_rows, "orders": retail_rows[ORDERS]}
    message = _start_fails(
        seeded_request({"retail": rows}, domains=["retail"], typesense=False, run_id=run_id)
    )
    assert "unknown tables: orders" in message
    message = _start_fails(seeded_request({"travel": {}}, domains=["retail"], typesense=False, run_id=run_id))
    assert "'travel'" in message


def test_image_removed_after_the_run_resolved_it(base_images: Any, retail_rows: Any, run_id: str) -> None:
    """A tag resolved at the start of a run and gone by the time an attempt starts
    (a rebuild pruned it): the error says so instead of docker's failed pull."""
    images = dict(resolve_images(False))
    images["servers"] = "tbx/servers:feedfacefeedface"
    request = seeded_request(
        {"retail": retail_rows}, domains=["retail"], typesense=False, run_id=run_id, images=images
    )
    with pytest.raises(ImageMissingError, match="tbx/servers:feedfacefeedface no longer exists"):
        Sandbox(request).start()
    assert leftovers(run_id) == ([], [])


FULL_RANGE = "10.212.254.224/27"  # room for one attempt network, which the test takes


@pytest.fixture
def full_address_range(dclient: Any, run_id: str) -> Any:
    """TBX_SUBNET_RANGE's only /27 held by a network of this test (labelled, removed after)."""
    import docker.types

    from sandbox import labels as lbl

    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=FULL_RANGE)])
    labels = lbl.labels_for(f"{run_id}-holder", lbl.new_id("att"), "network", 0)
    net = dclient.networks.create(lbl.new_id("tbx-net-full"), internal=True, ipam=ipam, labels=labels)
    try:
        yield FULL_RANGE
    finally:
        net.remove()


def test_an_exhausted_address_pool_is_a_clear_error_with_the_fix_and_starts_nothing(
    full_address_range: str, retail_rows: Any, base_images: Any, run_id: str, spawn: Any, tbx: str,
    retail_seed_file: Path, monkeypatch: pytest.MonkeyPatch, dclient: Any,
) -> None:  # fmt: skip
    from sandbox import NetworkPoolExhaustedError
    from sandbox import labels as lbl
    from sandbox.subnets import RANGE_ENV

    # The attempt's start: it fails before any container, and what it made is gone.
    monkeypatch.setenv(RANGE_ENV, full_address_range)
    request = seeded_request({"retail": retail_rows}, domains=["retail"], typesense=True, run_id=run_id)
    with pytest.raises(NetworkPoolExhaustedError) as err:
        Sandbox(request).start()
    assert f"address range {full_address_range}" in str(err.value)
    assert "tbx gc" in str(err.value) and f"{RANGE_ENV}=" in str(err.value)
    assert leftovers(run_id) == ([], [])

    # At the command line: exit 2 with the message and the fix, no traceback, nothing left.
    proc = spawn(
        [tbx, "up", "--pg-seed", str(retail_seed_file), "--no-typesense"], **{RANGE_ENV: full_address_range}
    )
    assert proc.finish(120) == 2, proc.err
    assert "Traceback" not in proc.err
    # A shared daemon may hold another job's leftovers: the start sweep's warnings about
    # them come first, then the one error line.
    errors = [line for line in proc.err.splitlines() if not line.startswith("WARNING ")]
    assert errors and errors[0].startswith("tbx: no free /27 subnet left"), proc.err
    assert f"{RANGE_ENV}=" in errors[0], proc.err
    owner = {"label": f"{lbl.OWNER_PID}={proc.popen.pid}"}
    assert dclient.containers.list(all=True, filters=owner) == []
    assert dclient.networks.list(filters=owner) == []


def test_a_container_that_dies_while_starting_is_named_at_once(
    base_images: Any, retail_rows: Any, run_id: str
) -> None:
    """PostgreSQL refuses its command line and exits: the readiness wait learns it from
    the container's cgroup (or the daemon) within its next look, not at the start timeout."""
    import time

    from sandbox import ContainerStartError, Limits

    request = seeded_request(
        {"retail": retail_rows},
        domains=["retail"],
        typesense=False,
        run_id=run_id,
        limits=Limits(pg_temp_file_limit="not-a-size"),
        start_timeout=300,
    )
    t = time.monotonic()
    with pytest.raises(ContainerStartError, match=r"postgres.*exited with code") as err:
        Sandbox(request).start()
    assert time.monotonic() - t < 100, "waited for the start timeout instead of seeing the exit"
    assert "temp_file_limit" in str(err.value)  # its last log lines say why
    assert leftovers(run_id) == ([], [])
