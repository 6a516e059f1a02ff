"""Policy search: latency per search (keyword vs hybrid) and what hybrid adds to a tool server.

1. Starts the tbx Typesense image (hardened like a sandbox's), indexes every
   domain's policy documents twice: keyword only, and with their embeddings
   (host cache, ``servers.toolsets.knowledge.document_vectors``).
2. Latency: runs every labelled query of tests/data/policy_queries.yaml through
   ``search_policy`` in this process, keyword and hybrid (hybrid = embed the
   query + one multi-search), and prints p50/p95, plus the query embedding alone.
3. Server cost: runs the tbx servers image as a tool server would run (same
   hardening, 512m, read-only, uid 10001) with a probe instead of uvicorn: it
   imports what the server imports, then searches twice, and reports its
   memory (VmRSS, RssAnon/RssFile, the container's cgroup usage) before the
   first search and after the second, and the time of each search. Once
   against the keyword collection, once against the hybrid one: the
   difference is what vectors cost a server.

Usage::

    python benchmarks/policy_search.py [--passes 1] [--domain retail] [--json]

Containers carry ``tbx.run=bench-policy-search`` (+ tbx.created / tbx.pid) and
are removed at the end. Figures on a shared machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import docker
from docker.models.containers import Container

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from policy_quality import load_queries, scenario_sources  # noqa: E402

from bench.dataset import load_benchmark  # noqa: E402
from sandbox import require_image  # noqa: E402
from servers.toolsets import knowledge  # noqa: E402
from servers.toolsets.knowledge import E5, document_vectors, index_sources, search_policy, snippet_texts  # noqa: E402

RUN_LABEL = "bench-policy-search"
API_KEY = "bench-" + os.urandom(6).hex()

PROBE = r"""
import json, os, sys, time
def mem():
    out = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) * 1024
    for path in ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes"):
        try:
            out["cgroup"] = int(open(path).read())
            break
        except OSError:
            pass
    return out
t0 = time.perf_counter()
import servers.__main__  # the tool server's own imports
from servers.toolsets.knowledge import PolicySearch
from servers.registry import load_domain
load_domain(sys.argv[1])
search = PolicySearch.from_env()
out = {"imports_s": time.perf_counter() - t0, "before": mem()}
for i, query in enumerate(sys.argv[2:4]):
    t = time.perf_counter()
    result = search.search(query, 3)
    out[f"search{i + 1}_s"] = time.perf_counter() - t
    out[f"search{i + 1}_top"] = result["snippets"][0]["source"]
out["after"] = mem()
out["mode"] = search.mode
print(json.dumps(out))
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def labels(role: str) -> dict[str, str]:
    return {
        "tbx.run": RUN_LABEL,
        "tbx.created": str(int(time.time())),
        "tbx.pid": str(os.getpid()),
        "tbx.role": role,
    }


def bridge_ip(container: Container) -> str:
    container.reload()
    return next(
        n["IPAddress"] for n in container.attrs["NetworkSettings"]["Networks"].values() if n["IPAddress"]
    )


def start_typesense(client: docker.DockerClient) -> tuple[Container, str]:
    container = client.containers.run(
        require_image("typesense"),
        detach=True,
        labels=labels("typesense"),
        environment={"TYPESENSE_API_KEY": API_KEY},
        read_only=True,
        tmpfs={"/data": "rw,size=128m,uid=10002,gid=10002"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="512m",
        pids_limit=256,
    )
    ip = bridge_ip(container)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{ip}:8108/health", timeout=1):
                return container, ip
        except OSError:
            time.sleep(0.05)
    container.remove(force=True)
    raise RuntimeError("typesense did not become healthy")


def probe_server(
    client: docker.DockerClient, ts_ip: str, collection: str, domain: str, queries: list[str]
) -> Any:
    container = client.containers.run(
        require_image("servers"),
        entrypoint=["python", "-c", PROBE, domain, *queries],
        detach=True,
        labels=labels(f"server-{domain}"),
        environment={
            "TBX_PG_DSN": "host=127.0.0.1 dbname=unused",
            "TBX_TYPESENSE_URL": f"http://{ts_ip}:8108",
            "TBX_TYPESENSE_API_KEY": API_KEY,
            "TBX_TYPESENSE_COLLECTION": collection,
        },
        read_only=True,
        tmpfs={"/tmp": "rw,size=16m,uid=10001,gid=10001"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="512m",
        memswap_limit="512m",
        pids_limit=256,
    )
    try:
        status = container.wait(timeout=600)
        logs = container.logs().decode(errors="replace")
        if status["StatusCode"] != 0:
            raise RuntimeError(f"probe failed:\n{logs}")
        return json.loads(logs.strip().splitlines()[-1])
    finally:
        container.remove(force=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=1, help="times every query is searched (latency)")
    ap.add_argument("--domain", default="retail", help="domain of the server-cost probe")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    bench = load_benchmark()
    queries = load_queries()
    dclient = docker.from_env()
    ts, ip = start_typesense(dclient)
    report: dict[str, Any] = {}
    try:
        client = knowledge.make_client(f"http://{ip}:8108", API_KEY, timeout_s=30)
        collections: dict[str, dict[str, str]] = {}
        t = time.perf_counter()
        for domain in queries:
            sources = scenario_sources(bench, domain)
            kw, hy = knowledge.new_collection_name(), knowledge.new_collection_name()
            index_sources(client, kw, sources)
            index_sources(client, hy, sources, embeddings=document_vectors(snippet_texts(sources)))
            collections[domain] = {"keyword": kw, "hybrid": hy}
        report["index_all_s"] = time.perf_counter() - t

        e5 = E5(threads=1)
        t = time.perf_counter()
        e5.query("warm-up")
        report["model_load_and_first_embed_s"] = time.perf_counter() - t
        lat: dict[str, list[float]] = {"keyword": [], "hybrid": [], "embed": []}
        for _ in range(args.passes):
            for domain, items in queries.items():
                for q in items:
                    t = time.perf_counter()
                    search_policy(client, collections[domain]["keyword"], q.q, 3)
                    lat["keyword"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    search_policy(client, collections[domain]["hybrid"], q.q, 3, e5.query)
                    lat["hybrid"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    e5.query(q.q)
                    lat["embed"].append(time.perf_counter() - t)
        report["latency_ms"] = {
            k: {"n": len(v), "p50": 1000 * percentile(v, 50), "p95": 1000 * percentile(v, 95)}
            for k, v in lat.items()
        }

        probe_queries = ["late parcel compensation", "How do I return an opened item?"]
        report["server"] = {
            mode: probe_server(dclient, ip, collections[args.domain][mode], args.domain, probe_queries)
            for mode in ("keyword", "hybrid")
        }
    finally:
        ts.remove(force=True)
        for c in dclient.containers.list(
            all=True, filters={"label": [f"tbx.run={RUN_LABEL}", f"tbx.pid={os.getpid()}"]}
        ):
            c.remove(force=True)

    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"indexing 5 domains x 2 collections: {report['index_all_s']:.2f} s (vectors from the host cache)")
    print(f"host: model load + first query embedding {report['model_load_and_first_embed_s'] * 1000:.0f} ms")
    for k, v in report["latency_ms"].items():
        print(f"  {k:8s} n={v['n']:4d}  p50 {v['p50']:7.1f} ms  p95 {v['p95']:7.1f} ms")
    mib = 2**20
    for mode, r in report["server"].items():
        b, a = r["before"], r["after"]
        print(
            f"server ({mode}, mode detected {r['mode']}): imports {r['imports_s']:.2f} s; "
            f"1st search {r['search1_s'] * 1000:.0f} ms, 2nd {r['search2_s'] * 1000:.0f} ms; "
            f"VmRSS {b['VmRSS'] / mib:.1f} -> {a['VmRSS'] / mib:.1f} MiB "
            f"(anon {b['RssAnon'] / mib:.1f} -> {a['RssAnon'] / mib:.1f}, file {b['RssFile'] / mib:.1f} -> "
            f"{a['RssFile'] / mib:.1f}); cgroup {b.get('cgroup', 0) / mib:.1f} -> {a.get('cgroup', 0) / mib:.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
