"""What a long-running tbx server holds, read from the kernel and the Docker daemon:
the figures benchmarks/long_haul.py and benchmarks/burst.py sample.

- its process tree (the server and every descendant): RSS, open fds, threads, CPU seconds;
- the Docker daemon: its event subscribers (`NEventsListener` of `GET /info`, as
  scripts/dockerd-state.py reads it; daemon-wide, so other clients count too) and the
  connections the tree holds to the daemon's socket (each event stream is one);
- the containers and networks labelled with the server's run id (`tbx.run`);
- the machine: load average, cores, memory available;
- a container's CPU seconds from its cgroup (sandbox.start_deadline.container_cpu), and the
  Docker daemon's own (dockerd, containerd, the shims, with what they reaped: runc).

Standard library plus the docker SDK; nothing here asks tbx for its own view.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import docker

from sandbox.start_deadline import container_cpu

TCK = os.sysconf("SC_CLK_TCK")
DOCKER_SOCK = "/var/run/docker.sock"
DAEMON_COMMS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "fuse-overlayfs")

__all__ = [
    "container_cpu",
    "daemon_cpu",
    "docker_figures",
    "machine",
    "tree",
    "tree_cpu",
    "tree_figures",
]


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def tree(root: int) -> list[int]:
    """`root` and every live descendant (by each process's parent in /proc)."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                children.setdefault(int(_stat(int(p.name))[1]), []).append(int(p.name))
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def tree_cpu(root: int, reaped: bool = True) -> float:
    """CPU seconds of the tree (user + system), with what its members reaped (their children
    that exited, e.g. a `docker` CLI or psql run) when `reaped`."""
    total = 0.0
    for pid in tree(root):
        try:
            s = _stat(pid)
        except OSError:
            continue
        total += (int(s[11]) + int(s[12]) + ((int(s[13]) + int(s[14])) if reaped else 0)) / TCK
    return total


def tree_figures(root: int) -> dict[str, Any]:
    """RSS (MiB), open fds, threads and processes of `root`'s tree now."""
    rss_kib = fds = threads = procs = 0
    for pid in tree(root):
        try:
            st = _status(pid)
            n_fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue  # exited meanwhile
        procs += 1
        rss_kib += int(st.get("VmRSS", "0 kB").split()[0])
        threads += int(st.get("Threads", "0"))
        fds += n_fds
    return {"rss_mib": round(rss_kib / 1024, 1), "fds": fds, "threads": threads, "procs": procs}


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(target[8:-1])
    except OSError:
        pass
    return out


def docker_sock_connections(pids: list[int], sock: str = DOCKER_SOCK) -> int:
    """How many of the processes' sockets are connected to the daemon's socket (`ss -x`:
    the daemon's side names the path, the client's side is its peer)."""
    mine = set().union(*(_socket_inodes(p) for p in pids)) if pids else set()
    if not mine:
        return 0
    try:
        out = subprocess.run(["ss", "-xn"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return -1
    n = 0
    for line in out.splitlines():
        parts = line.split()
        # Netid State Recv-Q Send-Q Local-Address Local-Port Peer-Address Peer-Port
        if len(parts) >= 8 and parts[4] == sock and parts[7] in mine:
            n += 1
    return n


def docker_figures(client: docker.DockerClient, run_id: str | None, root: int | None) -> dict[str, Any]:
    """The daemon's event subscribers (daemon-wide), the tree's connections to its socket,
    and the containers and networks labelled with `run_id`."""
    info = client.info()
    out: dict[str, Any] = {"event_subscribers": info.get("NEventsListener")}
    if root is not None:
        out["docker_conns"] = docker_sock_connections(tree(root))
    if run_id is not None:
        label = {"label": f"tbx.run={run_id}"}
        out["networks"] = len(client.networks.list(filters=label))
        out["containers"] = len(client.containers.list(all=True, filters=label, ignore_removed=True))
    return out


def daemon_cpu() -> float:
    """CPU seconds of the Docker daemon's processes (dockerd, containerd, the shims,
    fuse-overlayfs), with what they reaped (runc runs, iptables)."""
    return sum(daemon_cpus().values())


def daemon_cpus() -> dict[int, float]:
    """`daemon_cpu` per process: a window's figure sums each pid's growth, since the shims
    and mounts come and go with the containers (a sum of the live ones can fall)."""
    out: dict[int, float] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if (p / "comm").read_text().strip() not in DAEMON_COMMS:
                continue
            s = _stat(int(p.name))
        except OSError:
            continue
        out[int(p.name)] = (int(s[11]) + int(s[12]) + int(s[13]) + int(s[14])) / TCK
    return out


def machine() -> dict[str, Any]:
    """Load average, cores, memory and the other work on the machine (its busiest processes
    not in `exclude`, and the Docker daemons' running containers)."""
    mem = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            mem[key] = round(int(value.split()[0]) / 2**20, 1)
    return {
        "load": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        "mem_total_gib": mem.get("MemTotal"),
        "mem_available_gib": mem.get("MemAvailable"),
    }


def other_work(exclude_root: int | None = None, top: int = 8) -> list[str]:
    """The processes that used the most CPU over the last second outside `exclude_root`'s
    tree and containers: what else the machine was doing (for the record)."""
    import time

    skip = set(tree(exclude_root)) if exclude_root is not None else set()

    def snapshot() -> dict[int, tuple[str, float]]:
        out = {}
        for p in Path("/proc").iterdir():
            if not p.name.isdigit() or int(p.name) in skip:
                continue
            try:
                s = _stat(int(p.name))
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:90]
            except OSError:
                continue
            out[int(p.name)] = (cmd or "[kernel]", (int(s[11]) + int(s[12])) / TCK)
        return out

    a = snapshot()
    time.sleep(1.0)
    b = snapshot()
    busy = sorted(
        ((cpu - a[pid][1], cmd) for pid, (cmd, cpu) in b.items() if pid in a and cpu - a[pid][1] > 0.02),
        reverse=True,
    )
    return [f"{share:.2f} " + re.sub(r"\s+", " ", cmd).strip() for share, cmd in busy[:top]]


def busy_cpu() -> float:
    """Machine-wide CPU seconds outside idle and iowait (every process, the kernel's too)."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(f[:8]) - f[3] - f[4]) / TCK


class CpuLedger:
    """CPU seconds over a window, read from the kernel: the server's process tree (with
    what it reaped), the containers labelled with its run (each container's cgroup counter,
    last value seen; looked up every `discover` s, read every `every` s, so a removed
    container's last fraction of a second is missed), the Docker daemon's processes, and
    the machine's busy total.

        with CpuLedger(root, run_id) as ledger: ...
        ledger.totals()  # {"tbx": s, "containers": s, "daemon": s, "machine": s, "wall": s}
    """

    def __init__(self, root: int, run_id: str, every: float = 0.5, discover: float = 2.0):
        import threading

        self.root, self.run_id, self.every, self.discover = root, run_id, every, discover
        self.seen: dict[str, float] = {}  # container id -> CPU seconds, last read
        self.daemon_seen: dict[int, float] = {}  # daemon pid -> CPU seconds, last read
        self.daemon_first: dict[int, float] = {}
        self.first: dict[str, float] = {}  # container id -> CPU seconds when first read
        self.known: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-ledger", daemon=True)
        self._client = docker.from_env(timeout=60)

    def _find(self) -> None:
        label = {"label": f"tbx.run={self.run_id}"}
        for c in self._client.containers.list(all=True, filters=label, ignore_removed=True):
            self.known.add(c.id)

    def _read(self) -> None:
        for pid, used in daemon_cpus().items():
            self.daemon_seen[pid] = used
            self.daemon_first.setdefault(pid, used)
        for cid in list(self.known):
            cpu = container_cpu(cid)
            if cpu is None:
                continue
            self.seen[cid] = cpu
            self.first.setdefault(cid, cpu)

    def _loop(self) -> None:
        import time

        last_find = 0.0
        while not self._stop.wait(self.every):
            try:
                if time.monotonic() - last_find >= self.discover:
                    self._find()
                    last_find = time.monotonic()
                self._read()
            except Exception:  # the daemon busy: the next tick tries again
                continue

    def __enter__(self) -> CpuLedger:
        import time

        self._find()
        self._read()
        self.before = dict(self.seen)  # containers alive at the start: only what they use from now
        self.t0 = time.monotonic()
        self.daemon_before = dict(self.daemon_seen)
        self.tbx0, self.machine0 = tree_cpu(self.root), busy_cpu()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        import time

        self._stop.set()
        self._thread.join()
        self._find()
        self._read()
        self.wall = time.monotonic() - self.t0
        self.tbx1, self.machine1 = tree_cpu(self.root), busy_cpu()

    def totals(self) -> dict[str, float]:
        containers = sum(cpu - self.before.get(cid, 0.0) for cid, cpu in self.seen.items())
        return {
            "tbx": round(self.tbx1 - self.tbx0, 2),
            "containers": round(containers, 2),
            "daemon": round(
                sum(
                    cpu - self.daemon_before.get(pid, self.daemon_first[pid])
                    for pid, cpu in self.daemon_seen.items()
                ),
                2,
            ),
            "machine": round(self.machine1 - self.machine0, 2),
            "wall": round(self.wall, 2),
            "container_count": len(self.seen),
        }
