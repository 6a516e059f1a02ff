"""Watches the containers and networks of registered sandboxes so the proxy
never relays to a sandbox that is gone: one Docker event stream (die, destroy,
network disconnect) reports a loss within milliseconds, and a check of every
watched container every few seconds (and after the stream reconnects) catches
what an event stream can miss. A daemon that cannot be asked counts as a loss:
the proxy cannot tell whether the address it would connect to is still the
attempt's.

The stream also keeps what it saw of every container and network since it
connected (started, on which networks, gone): a sandbox whose whole life the
stream saw, and nothing of it lost, is known alive without asking the daemon
(`known_alive`), which a registration uses instead of a Docker call. A
reconnect forgets it all (events may have been missed meanwhile): sets started
before it are checked by asking the daemon again.

On a daemon shared with other clients the stream carries their events too. What it
keeps is tbx's alone: containers by their labels (`sandbox.labels.RUN`, which a
container event carries), a network's connect and disconnect by the container, a
network's removal when a tbx container was on it (a network event carries no
labels). Another client's churn therefore neither grows the memory nor pushes tbx's
own losses out of it. Only the names of networks created and not yet removed are kept
whoever made them (at its creation nothing tells whose a network is): bounded by the
networks the daemon holds at once."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests.exceptions

from sandbox.container_fate import Fate, lost_fate
from sandbox.docker_api import docker_client
from sandbox.faults import NODE_FAULT
from sandbox.labels import RUN
from sandbox.proxy.models import SandboxGoneError

log = logging.getLogger(__name__)

CHECK_EVERY = 3.0  # seconds between full checks (the event stream reports most losses at once)
RECONNECT_GRACE = 5.0  # seconds the daemon may be unreachable before every sandbox counts as lost
EVENTS = ["die", "destroy", "disconnect", "pause"]
# followed too, for `known_alive`: what the stream saw begin
LIFE_EVENTS = ["start", "create", "connect"]
REMEMBER_LOSSES = 4096  # containers and networks lost, kept for sets registered after the loss

OnGone = Callable[[str, str, Fate | None], None]  # (watch key, cause, the lost container's fate)


@dataclass(frozen=True)
class _Loss:
    """A loss of a watched set an event told of, reported in the order of the events
    (the first names the cause: a killed container's die comes before its disconnect).
    A container's is described by asking the daemon (exit code, OOM kill) first."""

    key: str
    cause: str  # as the event told it (a container's: when the daemon cannot say more)
    role: str = ""
    container: str = ""  # the id to describe


@dataclass(frozen=True)
class _Watched:
    containers: dict[str, str]  # role -> id
    network: str | None


class DaemonUnreachable(SandboxGoneError):
    """The Docker daemon could not be asked: the sandbox's state is unknown (the node
    failed, not a container)."""

    fault = NODE_FAULT


def _summaries(ids: list[str], client: Any = None) -> dict[str, dict[str, Any]]:
    """id -> the daemon's container summary, for those of `ids` that exist (one API call)."""
    client = client or docker_client()
    try:
        listed = client.api.containers(all=True, filters={"id": ids}) if ids else []
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise DaemonUnreachable(f"sandbox state unknown: cannot ask the Docker daemon ({exc})") from exc
    return {c["Id"]: c for c in listed}


def _cause(
    containers: Mapping[str, str], network: str | None, found: Mapping[str, dict[str, Any]]
) -> tuple[str, Fate | None] | None:
    """Why the sandbox counts as lost (and the lost container's fate, when one is), or
    None when all its containers run on its network."""
    for role, cid in containers.items():
        summary = found.get(cid)
        if summary is None:
            return f"sandbox gone: its {role} container {cid[:12]} no longer exists", None
        if summary.get("State") != "running":
            # The summary lacks the exit code and the OOM flag: ask for the whole story.
            fate = lost_fate({role: cid})
            told = fate.text if fate else f"its {role} container {cid[:12]} is {summary.get('State')}"
            return f"sandbox gone: {told}", fate
        networks = (summary.get("NetworkSettings") or {}).get("Networks") or {}
        if network is not None and network not in networks:
            return f"sandbox gone: its {role} container {cid[:12]} left network {network}", None
    return None


def check_alive(containers: Mapping[str, str], network: str | None) -> None:
    """Raise SandboxGoneError unless every container runs (by id) and, when
    given, they are all still attached to `network`."""
    lost = _cause(containers, network, _summaries(list(containers.values())))
    if lost is not None:
        cause, fate = lost
        raise SandboxGoneError(cause, fault=None if fate is None else fate.fault)


class _Seen:
    """What the event stream saw since it connected (guarded by the watch's lock)."""

    def __init__(self) -> None:
        self.ours: set[str] = set()  # tbx's containers it saw created or started and not removed
        self.running: set[str] = set()  # tbx's containers it saw start and not die, pause or go
        self.networks: set[str] = set()  # networks (by name) it saw created and not removed: anyone's
        self.our_networks: set[str] = set()  # those of them a tbx container was connected to
        self.attached: set[tuple[str, str]] = set()  # (network, tbx container) it saw connect
        # tbx's container id or network name -> what happened to it (also of sets not watched yet)
        self.lost: OrderedDict[str, str] = OrderedDict()

    def lose(self, what: str, cause: str) -> None:
        self.lost[what] = cause
        while len(self.lost) > REMEMBER_LOSSES:
            self.lost.popitem(last=False)


class SandboxWatch:
    """Calls `on_gone(key, cause)` once per watched sandbox that is lost (from its own threads)."""

    def __init__(self, on_gone: OnGone, check_every: float = CHECK_EVERY):
        self.on_gone = on_gone
        self.check_every = check_every
        self._watched: dict[str, _Watched] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._check_now = threading.Event()  # the stream (re)connected: check without waiting
        self._threads: list[threading.Thread] = []
        self._stream: Any = None
        self._unknown_since: float | None = None
        self._events_client: docker.DockerClient | None = None
        self._seen = _Seen()
        self.following = False  # the event stream is open (what `known_alive` knows is from it)
        # the losses events told of, reported (a Docker call for a container's) off the
        # stream's thread: see _follow_events
        self._losses: queue.SimpleQueue[_Loss | None] = queue.SimpleQueue()

    def start(self) -> None:
        """Follow the daemon's events from now on (idempotent; `add` starts it too)."""
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        if self._threads:
            return
        for target, name in (
            (self._follow_events, "events"),
            (self._check_loop, "check"),
            (self._report_losses, "fate"),
        ):
            thread = threading.Thread(target=target, name=f"tbx-proxy-watch-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def known_alive(self, containers: Mapping[str, str], network: str | None) -> bool:
        """The stream saw every container start (on `network`, when given) and none of it,
        nor the network, die, pause, leave or go since: `check_alive` would pass. False
        means unknown (ask the daemon), not lost."""
        with self._lock:
            seen = self._seen
            if any(cid not in seen.running for cid in containers.values()):
                return False
            if network is None:
                return True
            return network in seen.networks and all(
                (network, cid) in seen.attached for cid in containers.values()
            )

    def add(self, key: str, containers: Mapping[str, str], network: str | None) -> None:
        """Start watching (after `check_alive` passed for them, or `known_alive`). A loss
        the stream saw since that check is reported at once."""
        with self._lock:
            self._watched[key] = _Watched(dict(containers), network)
            self._start_locked()
            cause = _earlier_loss(self._seen, containers, network)
        if cause is not None:
            self._lost(key, cause)

    def discard(self, key: str) -> None:
        with self._lock:
            self._watched.pop(key, None)

    def close(self) -> None:
        self._stop.set()
        self._check_now.set()
        self._losses.put(None)
        self._close_stream()
        for thread in self._threads:
            thread.join(timeout=2)
        if self._events_client is not None:
            with contextlib.suppress(Exception):
                self._events_client.close()

    def _lost(self, key: str, cause: str, fate: Fate | None = None) -> None:
        with self._lock:
            if self._watched.pop(key, None) is None:
                return
        log.warning("attempt %s: %s", key, cause)
        self.on_gone(key, cause, fate)

    def check_all(self) -> None:
        """One listing of every watched container; a daemon unreachable for
        longer than RECONNECT_GRACE counts as losing them all."""
        with self._lock:
            items = list(self._watched.items())
        try:
            found = _summaries([cid for _, w in items for cid in w.containers.values()])
        except DaemonUnreachable as exc:
            now = time.monotonic()
            self._unknown_since = self._unknown_since or now
            if now - self._unknown_since >= RECONNECT_GRACE:
                self._all_lost(str(exc))
            return
        self._unknown_since = None
        for key, w in items:
            lost = _cause(w.containers, w.network, found)
            if lost is not None:
                self._lost(key, *lost)

    def _check_loop(self) -> None:
        while True:
            self._check_now.wait(self.check_every)
            self._check_now.clear()
            if self._stop.is_set():
                return
            self.check_all()

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()

    def _follow_events(self) -> None:
        """Read the stream for as long as the watch runs, never blocking on anything
        else: the daemon gives every subscriber a bounded buffer and, once it is full,
        waits up to 100 ms per event for it, for every event of every client. A
        reader that stalls (a Docker call of its own on a slow daemon) slows the
        whole daemon down, and with it the calls the reader waits for."""
        unreachable_since: float | None = None
        try:
            while not self._stop.is_set():
                try:
                    # Its own client: the stream holds a connection for as long as it runs.
                    self._events_client = self._events_client or docker.from_env()
                    with self._lock:
                        self._seen = _Seen()  # what happened before this stream is not known
                    self._stream = self._events_client.events(
                        decode=True,
                        filters={"type": ["container", "network"], "event": EVENTS + LIFE_EVENTS},
                    )
                    if self._stop.is_set():  # closed while the stream was being opened
                        return
                    unreachable_since = None
                    self.following = True
                    self._check_now.set()  # whatever happened while the stream was not open
                    for event in self._stream:
                        if self._stop.is_set():
                            return
                        self._on_event(event)
                except Exception as exc:  # the daemon went away (restart) or the stream broke
                    self.following = False
                    with self._lock:
                        self._seen = _Seen()
                    if self._stop.is_set():
                        return
                    now = time.monotonic()
                    unreachable_since = unreachable_since or now
                    if now - unreachable_since >= RECONNECT_GRACE:
                        self._all_lost(
                            f"sandbox state unknown: lost the Docker daemon's event stream ({exc!r})"
                        )
                        unreachable_since = None
                self._close_stream()
                self._stop.wait(0.5)
        finally:
            self.following = False
            self._close_stream()  # an open stream nobody reads would hold the daemon back

    def _report_losses(self) -> None:
        while (loss := self._losses.get()) is not None:
            with self._lock:
                if loss.key not in self._watched:
                    continue  # reported already (an earlier event of the set, the check)
            fate = lost_fate({loss.role: loss.container}) if loss.container else None
            self._lost(loss.key, f"sandbox gone: {fate.text}" if fate else loss.cause, fate)

    def _all_lost(self, cause: str) -> None:
        """The daemon cannot be asked: every watched set is lost, its state unknown."""
        with self._lock:
            keys = list(self._watched)
        for key in keys:
            self._lost(key, cause, Fate("", cause, unknown=True))  # no container in particular

    def _on_event(self, event: dict[str, Any]) -> None:
        kind, action = event.get("Type"), event.get("Action", "")
        actor = event.get("Actor") or {}
        attrs = actor.get("Attributes") or {}
        with self._lock:
            _remember(self._seen, kind, action, actor.get("ID") or "", attrs)
            items = list(self._watched.items())
        if action not in EVENTS:
            return
        for key, w in items:
            if kind == "container":
                for role, cid in w.containers.items():
                    if actor.get("ID") == cid:
                        told = f"its {role} container {attrs.get('name', cid[:12])} got a {action} event"
                        self._losses.put(_Loss(key, f"sandbox gone: {told}", role, cid))
            elif kind == "network" and w.network is not None and attrs.get("name") == w.network:
                if action == "destroy":
                    self._losses.put(_Loss(key, f"sandbox gone: its network {w.network} was removed"))
                elif action == "disconnect" and attrs.get("container") in w.containers.values():
                    self._losses.put(_Loss(key, f"sandbox gone: a container left its network {w.network}"))


def _remember(seen: _Seen, kind: Any, action: str, actor_id: str, attrs: Mapping[str, Any]) -> None:
    """Keep what one event tells of a tbx container's or network's life (`_Seen`; another
    client's containers and networks are passed over, see the module doc)."""
    if kind == "container":
        if RUN not in attrs:  # a container event carries the container's labels
            return
        if action in ("create", "start"):
            seen.ours.add(actor_id)
        if action == "start":
            seen.running.add(actor_id)
        elif action in ("die", "destroy", "pause"):
            seen.running.discard(actor_id)
            seen.lose(actor_id, f"container {attrs.get('name', actor_id[:12])} got a {action} event")
            if action == "destroy":
                seen.ours.discard(actor_id)
    elif kind == "network":
        name, container = attrs.get("name", ""), attrs.get("container", "")
        if action == "create":
            seen.networks.add(name)
            seen.lost.pop(name, None)  # a new network of a removed one's name
        elif action == "destroy":
            seen.networks.discard(name)
            if name in seen.our_networks:
                seen.our_networks.discard(name)
                seen.attached = {a for a in seen.attached if a[0] != name}
                seen.lose(name, f"its network {name} was removed")
        elif container not in seen.ours:  # another client's container (or one seen before the stream)
            return
        elif action == "connect":
            seen.attached.add((name, container))
            seen.our_networks.add(name)
        elif action == "disconnect":
            seen.attached.discard((name, container))
            seen.lose(f"{name}/{container}", f"a container left its network {name}")


def _earlier_loss(seen: _Seen, containers: Mapping[str, str], network: str | None) -> str | None:
    """A loss of the set the stream saw before it was watched, as the watch reports one."""
    keys: Iterable[str] = [
        *containers.values(),
        *([network, *(f"{network}/{cid}" for cid in containers.values())] if network else []),
    ]
    for key in keys:
        if key in seen.lost:
            return f"sandbox gone: {seen.lost[key]}"
    return None
