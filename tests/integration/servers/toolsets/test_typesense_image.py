"""The tbx Typesense image, run hardened, and the policy search against it.

Image: $TBX_TYPESENSE_IMAGE if set, else built from images/typesense/ (prepare.sh
into a temporary context, then docker build), tagged by the content hash of that
directory so later runs reuse it (typesense_container.py, the `typesense_image`
fixture). Containers carry the label tbx.run=test-typesense, publish no ports
(reached on their bridge IP) and are always removed.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import yaml
from typesense_container import UID, Running, container_labels, start_hardened

from servers.toolsets import knowledge
from servers.toolsets.knowledge import (
    PolicySearch,
    PolicySearchError,
    index_sources,
    make_client,
    search_policy,
)

pytestmark = pytest.mark.docker

RETAIL_SCENARIO = "dataset/scenario/sandbox_external_retail.yaml"
WARRANTY_SOURCE = "Product Defects and Warranty.md"


@pytest.fixture(scope="module")
def retail_sources(dataset: Path) -> list[dict[str, Any]]:
    scenario = yaml.safe_load((dataset / RETAIL_SCENARIO).read_text())
    sources: list[dict[str, Any]] = scenario["world_state"]["sandbox_external_retail"]["sources"]
    return sources


@pytest.fixture(scope="module")
def retail_index(typesense: Running, retail_sources: list[dict[str, Any]]) -> str:
    collection = knowledge.new_collection_name()
    n = index_sources(typesense.client(), collection, retail_sources)
    assert n == sum(len(s["snippets"]) for s in retail_sources) == 9
    return collection


# --------------------------------------------------------------------------- the image


def test_runs_hardened_as_non_root(typesense: Running) -> None:
    c = typesense.container
    c.reload()
    host = c.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert any(o.startswith("no-new-privileges") for o in host["SecurityOpt"])
    assert host["PidsLimit"] == 256 and host["Memory"] == 512 * 1024 * 1024
    assert not host.get("PortBindings")

    status = c.exec_run(["cat", "/proc/1/status"]).output.decode()
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split()[0] == str(UID)
    assert fields["CapEff"].strip() == "0000000000000000"
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["Threads"]) < 128  # well inside the pids limit
    assert "typesense-server" in c.exec_run(["cat", "/proc/1/cmdline"]).output.decode()


def test_api_key_from_env(typesense: Running) -> None:
    def get(key: str) -> int:
        req = urllib.request.Request(f"{typesense.url}/collections", headers={"X-TYPESENSE-API-KEY": key})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    assert get(typesense.api_key) == 200
    assert get("tbx") == 401  # the default key is not accepted when one is given


def test_version(typesense: Running) -> None:
    req = urllib.request.Request(f"{typesense.url}/debug", headers={"X-TYPESENSE-API-KEY": typesense.api_key})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert b'"version":"0.24.1"' in resp.read()


def test_starts_from_baked_snapshot(dclient: docker.DockerClient, typesense_image: str) -> None:
    running = start_hardened(dclient, typesense_image)
    try:
        logs = running.container.logs().decode(errors="replace")
        assert "on_snapshot_load" in logs, logs[-3000:]
        assert "Snapshot does not exist" not in logs
        print(f"healthy {running.seconds_to_healthy * 1000:.0f} ms after container.start()")
    finally:
        running.container.remove(force=True)


def test_default_api_key_is_tbx(dclient: docker.DockerClient, typesense_image: str) -> None:
    running = start_hardened(dclient, typesense_image, env={"TYPESENSE_API_KEY": ""})
    try:
        running.api_key = "tbx"
        assert running.client().collections.retrieve() == []
    finally:
        running.container.remove(force=True)


def test_read_only_without_tmpfs_fails_clearly(dclient: docker.DockerClient, typesense_image: str) -> None:
    container = dclient.containers.create(
        typesense_image,
        detach=True,
        labels=container_labels(),
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
    )
    try:
        container.start()
        assert container.wait(timeout=30)["StatusCode"] == 64
        assert "mount a tmpfs" in container.logs().decode()
    finally:
        container.remove(force=True)


# --------------------------------------------------------------------------- policy search


def test_warranty_query_finds_the_warranty_policy(
    typesense: Running, retail_index: str, retail_sources: list[dict[str, Any]]
) -> None:
    texts = {s["name"]: s["snippets"][0] for s in retail_sources}
    client = typesense.client()
    for query in ("warranty", "How do I file a warranty claim for a defective product?"):
        result = search_policy(client, retail_index, query, 3)
        snippets = result["snippets"]
        assert len(snippets) == 3
        assert snippets[0]["source"] == WARRANTY_SOURCE, (query, [s["source"] for s in snippets])
        for s in snippets:
            assert set(s) == {"source", "score", "vector_distance", "text"}
            assert s["vector_distance"] == 2.0
            assert isinstance(s["score"], int) and s["score"] > 0
            assert s["text"] == texts[s["source"]]  # the whole snippet, not a highlight


def test_other_topics_rank_their_policy_first(typesense: Running, retail_index: str) -> None:
    client = typesense.client()
    expected = {
        "membership cancellation and points balance": "Membership Management.md",
        "customer tier": "Customer Segmentation and Tiers.md",
        "package lost in transit": "Order Status and Tracking.md",
    }
    for query, source in expected.items():
        assert search_policy(client, retail_index, query, 3)["snippets"][0]["source"] == source, query


@pytest.mark.parametrize(
    ("given", "count"), [(None, 3), (0, 3), (-5, 3), (1, 1), (7, 7), (10, 10), (11, 10), (50, 10)]
)
def test_max_results_clamping(typesense: Running, given: int | None, count: int) -> None:
    client = typesense.client()
    collection = f"clamp-{os.getpid()}"
    if collection not in [c["name"] for c in client.collections.retrieve()]:
        sources = [
            {"name": f"Synthetic {i:02d}.md", "snippets": [f"synthetic policy {i} covers topic {i}"]}
            for i in range(12)
        ]
        assert index_sources(client, collection, sources) == 12
    result = search_policy(client, collection, "synthetic policy", given)
    assert len(result["snippets"]) == count
    assert len({s["source"] for s in result["snippets"]}) == count


def test_unmatched_query_still_returns_documents(typesense: Running, retail_index: str) -> None:
    result = search_policy(typesense.client(), retail_index, "xylophone quasar", 4)
    assert len(result["snippets"]) == 4  # filled by the empty keyword search, as in the reference


def test_no_index_is_service_unavailable(typesense: Running) -> None:
    client = typesense.client()
    assert index_sources(client, "never-created", []) == 0
    assert "never-created" not in [c["name"] for c in client.collections.retrieve()]
    with pytest.raises(PolicySearchError) as err:
        search_policy(client, None, "warranty", 3)
    assert str(err.value) == "Search service is not available"
    env = {
        "TBX_TYPESENSE_URL": typesense.url,
        "TBX_TYPESENSE_API_KEY": typesense.api_key,
        "TBX_TYPESENSE_COLLECTION": "",
    }
    with pytest.raises(PolicySearchError, match=r"^Search service is not available$"):
        PolicySearch.from_env(env).search("warranty")


def test_search_from_env(typesense: Running, retail_index: str) -> None:
    env = {
        "TBX_TYPESENSE_URL": typesense.url,
        "TBX_TYPESENSE_API_KEY": typesense.api_key,
        "TBX_TYPESENSE_COLLECTION": retail_index,
    }
    result = PolicySearch.from_env(env).search("warranty", None)
    assert result["snippets"][0]["source"] == WARRANTY_SOURCE


def test_collection_never_created_is_service_unavailable(typesense: Running) -> None:
    # The sandbox names the collection before it knows whether there is anything to index.
    with pytest.raises(PolicySearchError) as err:
        search_policy(typesense.client(), "no-such-collection", "warranty", 3)
    assert str(err.value) == "Search service is not available"


def test_typesense_failures_are_reported(typesense: Running, retail_index: str) -> None:
    wrong_key = make_client(typesense.url, "wrong-key", retries=0)
    with pytest.raises(PolicySearchError, match=r"^Failed to search articles: .+"):
        search_policy(wrong_key, retail_index, "warranty", 3)
    closed_port = make_client(f"http://{typesense.ip}:8109", typesense.api_key, timeout_s=1, retries=0)
    t0 = time.perf_counter()
    with pytest.raises(PolicySearchError, match=r"^Failed to search articles: .+"):
        search_policy(closed_port, retail_index, "warranty", 3)
    assert time.perf_counter() - t0 < 5
