"""Where the machine's CPU goes during model attempts: one ledger per run, per
attempt, for one or more source trees side by side.

The workload is the density benchmark's model section (`density.model_run`:
`tbx run`'s coordinator, a model agent against benchmarks/stub_model.py, the
stub answering every completion after a fixed delay by playing the task's
golden calls, the simulated user answering the stop token). While it runs, a
sampler thread reads what the kernel counts, never an estimate:

* machine: /proc/stat (user, system, irq + softirq), so the kernel's share is seen;
* containers: each container's cgroup `cpuacct.usage`, read when the set is
  checked out (its boot, seeding, indexing and any wait in the warm pool) and
  again just before it is removed (the rest is what it spent serving the
  attempt: tool calls, state dumps, connections), per role;
* host processes: dockerd, containerd, the containerd shims, fuse-overlayfs,
  each with the CPU of the children it reaped (runc, iptables), and any other
  process that used CPU during the run (py-spy when profiling, other users);
* tbx's own process, per thread (the event loop, the tool proxy's threads,
  the watch, the reaper and the thread pool of Docker and database calls, the
  stub model's server), and its reaped children;
* with `--profile`, py-spy samples tbx's process and the report sums its
  on-CPU samples by what the stack was doing (agent loop, proxy relay, MCP
  client, state dumps, grading, Docker API, output writes, ...).

Trees: `--tree current=. --tree base=/tmp/tbx-base` runs the same workload
from each source tree (its own code and its own images), series interleaved
so each sees the same machine; the report puts the ledgers side by side with
their ratios. Each series runs in a fresh subprocess of this script with the
tree on PYTHONPATH.

    python benchmarks/attempt_cpu.py --tree base=/tmp/tbx-base --tree current=. \
        --concurrency 16 --tasks 43 --repeat 2 [--profile] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TCK = os.sysconf("SC_CLK_TCK")
# Docker's parent and tbx's own (sandbox.cgroups); spelt out here because a worker runs
# with another tree's code on its path, which may predate sandbox.cgroups.
CPUACCT = (Path("/sys/fs/cgroup/cpuacct/docker"), Path("/sys/fs/cgroup/cpuacct/tbx"))
CONTAINER_GROUPS = ("/docker/", "/tbx/")
HOST_GROUPS = {
    "dockerd": "dockerd",
    "containerd": "containerd",
    "containerd-shim": "shims",
    "containerd-shim-runc-v2": "shims",
    "fuse-overlayfs": "fuse-overlayfs",
    "docker-proxy": "docker-proxy",
    "py-spy": "profiler",
    "runc": "runc",
    "exe": "runc",  # runc re-executes itself (/proc/self/exe) to set a container up
}


# ---- what the kernel counts ------------------------------------------------------------


def machine_stat() -> dict[str, float]:
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = f[:8]
    return {"user": (user + nice) / TCK, "system": system / TCK, "irq": (irq + softirq + steal) / TCK}


def _stat_fields(path: Path) -> list[str]:
    return path.read_text().rsplit(")", 1)[1].split()


def proc_times(pid: str) -> tuple[float, float]:
    """(own utime+stime, reaped children's cutime+cstime) in seconds."""
    s = _stat_fields(Path(f"/proc/{pid}/stat"))
    return (int(s[11]) + int(s[12])) / TCK, (int(s[13]) + int(s[14])) / TCK


def cgroup_cpu(cid: str) -> float | None:
    for parent in CPUACCT:
        try:
            return int((parent / cid / "cpuacct.usage").read_text()) / 1e9
        except OSError:
            continue
    return None


REAPERS = ("tbx", "dockerd", "containerd", "shims", "fuse-overlayfs")
KERNEL_THREADS = ("kworker", "ksoftirqd", "rcu_", "kdamond", "migration", "kswapd", "jbd2", "khugepaged")


def _other(pid: str, comm: str) -> str:
    """Kernel threads (no command line) by name; anything else is not part of the run."""
    if comm.startswith(KERNEL_THREADS):
        return "kernel threads"
    return f"other:{comm}"


def in_container(pid: str) -> bool:
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    return any(group in text for group in CONTAINER_GROUPS)


class Ledger:
    """Samples every `every` seconds; keeps the last value seen per pid, tid and container."""

    def __init__(self, every: float = 1.0):
        self.every = every
        self.me = str(os.getpid())
        self.procs: dict[str, tuple[str, float, float]] = {}  # pid -> (group, own, children) last seen
        self.alive: set[str] = set()  # pids seen in the last sample
        self.procs0: dict[str, tuple[float, float]] = {}
        self.threads: dict[str, tuple[str, float]] = {}  # tid -> (name, cpu) last seen
        self.threads0: dict[str, float] = {}
        self.checked_out: dict[str, tuple[str, float]] = {}  # container id -> (role, cpu at checkout)
        self.removed: dict[str, tuple[str, float]] = {}  # container id -> (role, cpu before removal)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ledger", daemon=True)
        self._lock = threading.Lock()
        self.in_container: dict[str, bool] = {}

    # -- hooks the workload calls --
    def at_checkout(self, containers: dict[str, str]) -> None:
        for role, cid in containers.items():
            cpu = cgroup_cpu(cid)
            if cpu is not None:
                with self._lock:
                    self.checked_out[cid] = (role, cpu)

    def before_removal(self, cid: str, role: str) -> None:
        cpu = cgroup_cpu(cid)
        if cpu is not None:
            with self._lock:
                self.removed[cid] = (role, cpu)

    # -- sampling --
    def _names(self) -> dict[str, str]:
        return {str(t.native_id): t.name for t in threading.enumerate() if t.native_id is not None}

    def sample(self, first: bool = False) -> None:
        names = self._names()
        alive: set[str] = set()
        for task in Path("/proc/self/task").iterdir():
            try:
                s = _stat_fields(task / "stat")
            except OSError:
                continue
            cpu = (int(s[11]) + int(s[12])) / TCK
            name = names.get(task.name, self.threads.get(task.name, ("?", 0))[0])
            self.threads[task.name] = (name, cpu)
            if first:
                self.threads0[task.name] = cpu
        for p in Path("/proc").iterdir():
            pid = p.name
            if not pid.isdigit():
                continue
            try:
                # `runc init` starts outside the container's cgroup and moves in at once:
                # a process seen outside twice stays outside (fewer reads, less cost).
                known = self.in_container.get(pid)
                if known is None or (known is False and pid not in self.procs):
                    known = self.in_container[pid] = in_container(pid)
                if known:
                    self.procs.pop(pid, None)
                    self.procs0.pop(pid, None)
                    continue  # counted by its container's cgroup
                comm = (p / "comm").read_text().strip()
                own, children = proc_times(pid)
            except OSError:
                continue
            group = "tbx" if pid == self.me else HOST_GROUPS.get(comm) or _other(pid, comm)
            self.procs[pid] = (group, own, children)
            alive.add(pid)
            if first:
                self.procs0[pid] = (own, children)
        self.alive = alive

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> Ledger:
        self.machine0 = machine_stat()
        self.sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self.machine1 = machine_stat()

    # -- the ledger --
    def totals(self) -> dict[str, Any]:
        machine = {k: self.machine1[k] - self.machine0[k] for k in self.machine0}
        hosts: dict[str, float] = collections.Counter()
        reaped: dict[str, float] = collections.Counter()
        for pid, (group, own, children) in self.procs.items():
            own0, children0 = self.procs0.get(pid, (0.0, 0.0))
            if group == "fuse-overlayfs" and pid not in self.alive:
                continue  # exited: dockerd reaped it, its CPU is in dockerd's children
            if own - own0 > 0:
                hosts[group] += own - own0
            # Children reaped by the run's own processes (runc by the shims and dockerd,
            # iptables and psql by tbx); a long-lived shell's reaped children are not the run's.
            if children - children0 > 0 and group in REAPERS:
                reaped[group] += children - children0
        threads: dict[str, float] = collections.Counter()
        for tid, (name, cpu) in self.threads.items():
            threads[_thread_group(name)] += cpu - self.threads0.get(tid, 0.0)
        boot: dict[str, float] = collections.Counter()
        serve: dict[str, float] = collections.Counter()
        for cid, (role, end) in self.removed.items():
            role_group = role.split("-")[0]
            start = self.checked_out.get(cid)
            if start is None:  # a pool set never checked out (warm, closed at the end)
                boot[role_group] += end
                continue
            boot[role_group] += start[1]
            serve[role_group] += end - start[1]
        # The shims reap runc (create, start, delete) and each container's init, whose
        # CPU (its whole tree's) the container's cgroup already counts.
        containers_total = sum(end for _, end in self.removed.values())
        if "shims" in reaped:
            reaped["shims"] = max(0.0, reaped["shims"] - containers_total)
        return {
            "machine": machine,
            "hosts": dict(hosts),
            "reaped": dict(reaped),
            "threads": dict(threads),
            "containers_boot": dict(boot),
            "containers_serve": dict(serve),
            "containers_removed": len(self.removed),
            "containers_missed": len(set(self.checked_out) - set(self.removed)),
        }


def _thread_group(name: str) -> str:
    """Threads by job: the asyncio loop, its to_thread pool, the proxy's server, the stub."""
    for prefix, group in (
        ("MainThread", "event loop"),
        ("asyncio_", "thread pool (docker, dumps, db)"),
        ("ThreadPoolExecutor", "thread pools of a set (start, seed, remove)"),
        ("tbx-proxy-watch", "proxy watch"),
        ("tbx-proxy", "proxy server"),
        ("stub-model", "stub model"),
        ("ledger", "this benchmark's sampler"),
        ("tbx-teardown", "reaper (teardown)"),
        ("tbx-boot", "boot gate (container starts)"),
    ):
        if name.startswith(prefix):
            return group
    return f"thread:{name}"


# ---- py-spy: what tbx's process was doing ---------------------------------------------

CATEGORIES = (  # first match from the innermost frame outwards wins
    ("benchmarks/stub_model.py", "stub model"),
    ("density.py", "benchmark sampler"),
    ("attempt_cpu.py", "benchmark sampler"),
    ("judge/canonical", "state dumps (canonical)"),
    ("judge/", "grading"),
    ("bench/run/grading", "grading"),
    ("bench/run/output", "output writes"),
    ("bench/run/results", "output writes"),
    ("bench/run/recording", "output writes"),
    ("sandbox/proxy/watch", "proxy watch"),
    ("sandbox/proxy/", "proxy relay"),
    ("sandbox/admission", "admission"),
    ("bench/run/admission", "admission"),
    ("sandbox/reaper", "teardown"),
    ("sandbox/host_firewall", "network guard"),
    ("sandbox/sandbox.py", "sandbox start/close"),
    ("sandbox/pool", "warm pool"),
    ("sandbox/", "sandbox (other)"),
    ("bench/rollout/", "agent loop"),
    ("bench/llm/", "model client"),
    ("bench/run/", "coordinator"),
)
LIBS = (
    ("docker/", "docker API"),
    ("psycopg", "postgres client"),
    ("mcp/", "MCP client/server"),
    ("httpx", "HTTP"),
    ("httpcore", "HTTP"),
    ("openai", "model client"),
    ("uvicorn", "HTTP server"),
    ("starlette", "HTTP server"),
    ("anyio", "async runtime"),
    ("asyncio", "async runtime"),
    ("pydantic", "pydantic"),
    ("json", "json"),
    ("ssl", "ssl"),
)


def categorize(stack: str) -> tuple[str, str]:
    """(tbx part, library) for one collapsed py-spy stack (outermost;...;innermost)."""
    frames = stack.split(";")
    part = "other"
    for frame in reversed(frames):
        hit = next((cat for key, cat in CATEGORIES if key in frame), None)
        if hit is not None:
            part = hit
            break
    lib = "tbx code"
    for frame in reversed(frames):
        hit = next((cat for key, cat in LIBS if f"({key}" in frame or f"/{key}" in frame), None)
        if hit is not None:
            lib = hit
            break
        if any(key in frame for key, _ in CATEGORIES):
            break
    return part, lib


def read_profile(path: Path) -> dict[str, Any]:
    parts: dict[str, int] = collections.Counter()
    pairs: dict[str, int] = collections.Counter()
    funcs: dict[str, int] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        part, lib = categorize(stack)
        parts[part] += n
        pairs[f"{part} / {lib}"] += n
        funcs[_innermost_own(stack)] += n
        total += n
    return {
        "samples": total,
        "parts": {k: v / total for k, v in parts.most_common()} if total else {},
        "top": {k: v / total for k, v in pairs.most_common(25)} if total else {},
        "functions": {k: v / total for k, v in funcs.most_common(30)} if total else {},
    }


OWN = ("bench/", "sandbox/", "judge/", "servers/", "benchmarks/", "attempt_cpu.py", "density.py")


def _innermost_own(stack: str) -> str:
    """The innermost frame of tbx's own code (where its time was spent, libraries included)."""
    for frame in reversed(stack.split(";")):
        if any(key in frame for key in OWN):
            return frame.split(" (", 1)[0] + " (" + frame.rsplit("/", 1)[-1]
    return "(no tbx frame) " + stack.split(";")[-1][:80]


@contextlib.contextmanager
def profiled(out: Path | None) -> Iterator[None]:
    if out is None:
        yield
        return
    cmd = ["py-spy", "record", "--pid", str(os.getpid()), "--rate", "100", "--format", "raw"]
    spy = subprocess.Popen(
        [*cmd, "--nonblocking", "--output", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    try:
        yield
    finally:
        spy.send_signal(2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy.wait(timeout=30)


# ---- one series (in a subprocess, from one tree) ---------------------------------------


def hook(ledger: Ledger) -> None:
    """Reads each set's cgroups at checkout and before removal."""
    import sandbox.provider as provider_mod
    import sandbox.sandbox as sandbox_mod

    checkout = provider_mod.DockerProvider.checkout

    async def counted_checkout(self: Any, request: Any) -> Any:
        session = await checkout(self, request)
        ledger.at_checkout(dict(session.containers))
        return session

    provider_mod.DockerProvider.checkout = counted_checkout  # type: ignore[method-assign]
    remove = sandbox_mod.remove_container

    def counted_remove(container: Any) -> Any:
        attrs = container.attrs  # a listing's summary (sparse) or an inspect
        labels = attrs.get("Labels") or (attrs.get("Config") or {}).get("Labels") or {}
        ledger.before_removal(container.id, labels.get("tbx.role", "?"))
        return remove(container)

    sandbox_mod.remove_container = counted_remove  # type: ignore[assignment]


def series(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import density
    import stub_model

    from bench.dataset import default_root, load_benchmark
    from bench.run import coordinator as runner_mod
    from sandbox import resolve_images

    # The stub's server thread by name, so its CPU is not counted as tbx's.
    start = stub_model.StubModel.start

    def named_start(self: Any) -> Any:
        out = start(self)
        if self._thread is not None:
            self._thread.name = "stub-model"
        return out

    stub_model.StubModel.start = named_start  # type: ignore[method-assign]

    bench = load_benchmark(args.dataset or default_root(), strict=False)
    tasks = [t for t in bench.tasks if t.domain == "retail"][: args.tasks]
    images = resolve_images(True)
    root = Path(args.work)
    (root / "golden").mkdir(parents=True, exist_ok=True)
    warm = runner_mod.Coordinator(
        bench, runner_mod.RunOptions(out=root / "w", golden_cache=root / "golden", skip_rubrics=True)
    )
    with density.running_images(images, images["servers"]):
        import asyncio

        asyncio.run(warm.compute_goldens(tasks, asyncio.Semaphore(2)))
    import shutil

    shutil.rmtree(root / f"model-{density.variant_key(images)}-c{args.concurrency}", ignore_errors=True)
    ledger = Ledger()
    hook(ledger)
    prof = root / "profile.txt" if args.profile else None
    with profiled(prof), ledger:
        run = density.model_run(
            bench,
            tasks,
            images,
            args.concurrency,
            args.warm if args.warm is not None else max(2, args.concurrency // 4),
            args.delay,
            root,
            images["servers"],
            repeat=args.repeat,
        )
    out = {"run": run, "ledger": ledger.totals(), "images": images}
    if prof is not None and prof.exists():
        out["profile"] = read_profile(prof)
        out["profile_raw"] = prof.read_text()
    return out


# ---- the report ------------------------------------------------------------------------


def per_attempt(s: dict[str, Any]) -> dict[str, float]:
    """The ledger's lines, CPU-s per attempt."""
    n = max(1, s["run"]["attempts"])
    led = s["ledger"]
    m = led["machine"]
    lines: dict[str, float] = {"machine (all)": sum(m.values()) / n}
    lines["  kernel: system"] = m["system"] / n
    lines["  kernel: irq+softirq"] = m["irq"] / n
    for role, v in sorted(led["containers_boot"].items()):
        lines[f"containers: {role}, before checkout"] = v / n
    for role, v in sorted(led["containers_serve"].items()):
        lines[f"containers: {role}, during the attempt"] = v / n
    others = {g: v for g, v in led["hosts"].items() if g.startswith("other:") or g == "profiler"}
    for group, v in sorted(led["hosts"].items(), key=lambda kv: -kv[1]):
        if group not in others and (group == "tbx" or v / n >= 0.005):
            lines[f"process: {group}"] = v / n
    lines["processes not of this run (other users', this benchmark's profiler)"] = sum(others.values()) / n
    children = {
        "shims": "runc runs (the shims' reaped children less the containers' own CPU)",
        "dockerd": "dockerd's children: fuse-overlayfs mounts that ended, iptables",
        "tbx": "tbx's children",
    }
    for group, v in sorted(led["reaped"].items(), key=lambda kv: -kv[1]):
        if v / n >= 0.005:
            lines[children.get(group, f"reaped children of {group}")] = v / n
    for name, v in sorted(led["threads"].items(), key=lambda kv: -kv[1]):
        if v / n >= 0.005:
            lines[f"  tbx thread: {name}"] = v / n
    own = led["threads"].get("this benchmark's sampler", 0.0) + led["threads"].get("stub model", 0.0)
    lines["process: tbx, less this benchmark's sampler and the stub model"] = (
        led["hosts"].get("tbx", 0.0) - own
    ) / n
    counted = (
        sum(led["containers_boot"].values())
        + sum(led["containers_serve"].values())
        + sum(v for g, v in led["hosts"].items() if g not in others)
        + sum(led["reaped"].values())
    ) / n
    run = lines["machine (all)"] - sum(others.values()) / n
    lines["machine, this run (all minus processes not of it)"] = run
    lines["not attributed (kernel work in process context of others, exited processes)"] = run - counted
    return lines


def report(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    keys: list[str] = []
    table = {name: per_attempt(s) for name, s in results.items()}
    for name in names:
        keys += [k for k in table[name] if k not in keys]
    head = "| CPU-s per attempt | " + " | ".join(names) + (" | ratio |" if len(names) == 2 else " |")
    rows = [head, "|" + " --- |" * (len(names) + 1 + (len(names) == 2))]
    for k in keys:
        vals = [table[n].get(k) for n in names]
        cells = [f"{v:.3f}" if v is not None else "" for v in vals]
        ratio = ""
        if len(names) == 2 and vals[0] and vals[1] is not None and abs(vals[0]) > 1e-3:
            ratio = f" {vals[1] / vals[0]:.2f} |"
        rows.append(f"| {k} | " + " | ".join(cells) + (" |" + ratio if len(names) == 2 else " |"))
    for label, key, fmt in (
        ("attempts (passed / system errors)", None, ""),
        ("attempts/min", "per_min", "{:.1f}"),
        ("in flight max", "in_flight_max", "{}"),
        ("tool call p50 ms", "tool_latency_ms_p50", "{:.0f}"),
        ("tool call p95 ms", "tool_latency_ms_p95", "{:.0f}"),
        ("loop lag p95 ms", "loop_lag_ms_p95", "{:.0f}"),
        ("leftovers", "leftovers", "{}"),
    ):
        if key is None:
            cells = [
                f"{s['run']['attempts']} ({s['run']['passed']} / {s['run']['errors']})"
                for s in results.values()
            ]
        else:
            cells = [fmt.format(s["run"][key]) if s["run"][key] is not None else "" for s in results.values()]
        rows.append(f"| {label} | " + " | ".join(cells) + (" | |" if len(names) == 2 else " |"))
    text = "\n".join(rows)
    for name, s in results.items():
        if "profile" in s:
            prof = s["profile"]
            tbx_cpu = table[name].get("process: tbx", 0.0)
            text += f"\n\ntbx's process ({name}), py-spy {prof['samples']} samples, CPU-s per attempt:\n"
            text += "\n".join(f"  {k:<40} {v * tbx_cpu:.3f}" for k, v in prof["parts"].items())
            text += "\n  innermost tbx function:\n"
            text += "\n".join(f"    {k[:90]:<92} {v * tbx_cpu:.3f}" for k, v in prof["functions"].items())
            text += "\n  top (part / library):\n"
            text += "\n".join(f"    {k:<56} {v * tbx_cpu:.3f}" for k, v in prof["top"].items())
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH of a source tree (repeatable)")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        help="NAME:VAR=VALUE: tree NAME's series run with VAR=VALUE (e.g. current:TBX_BOOT_CPU_GATE=0)",
    )
    ap.add_argument("--dataset", type=Path, default=None)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--warm", type=int, default=None, help="warm pool (default concurrency / 4)")
    ap.add_argument("--tasks", type=int, default=43, help="retail tasks per series")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--delay", type=float, default=3.0, help="seconds per stub completion")
    ap.add_argument("--rounds", type=int, default=1, help="series per tree, interleaved")
    ap.add_argument("--profile", action="store_true", help="sample tbx's process with py-spy")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker is not None:
        args.worker.write_text(json.dumps(series(args), default=str))
        return 0
    trees = dict(t.split("=", 1) for t in args.tree) or {"current": str(HERE.parent)}
    extra: dict[str, dict[str, str]] = {}
    for item in args.env:
        name, _, assignment = item.partition(":")
        var, _, value = assignment.partition("=")
        if name not in trees or not var:
            ap.error(f"--env {item!r}: expected NAME:VAR=VALUE with NAME one of {sorted(trees)}")
        extra.setdefault(name, {})[var] = value
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tbx-attempt-cpu-") as tmp:
        for rnd in range(args.rounds):
            for name, path in trees.items():
                tree = Path(path).resolve()
                out = Path(tmp) / f"{name}-{rnd}.json"
                cmd = [sys.executable, str(HERE / "attempt_cpu.py"), "--worker", str(out)]
                cmd += ["--work", str(Path(tmp) / name), "--concurrency", str(args.concurrency)]
                cmd += ["--tasks", str(args.tasks), "--repeat", str(args.repeat), "--delay", str(args.delay)]
                cmd += ["--warm", str(args.warm)] if args.warm is not None else []
                cmd += ["--dataset", str(args.dataset)] if args.dataset else []
                cmd += ["--profile"] if args.profile else []
                env = {**os.environ, "PYTHONPATH": str(tree), "TESTCONTAINERS_RYUK_DISABLED": "true"}
                env.update(extra.get(name, {}))
                print(f"[{time.strftime('%H:%M:%S')}] {name} round {rnd + 1}: {tree}", file=sys.stderr)
                subprocess.run(cmd, env=env, cwd=tree, check=True)
                results[name if args.rounds == 1 else f"{name}#{rnd + 1}"] = json.loads(out.read_text())
    text = report(results)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "report": text}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
