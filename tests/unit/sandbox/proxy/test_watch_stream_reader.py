"""The watch's event-stream reader keeps reading whatever the daemon is slow at, and
never leaves a stream open that nobody reads: Docker holds every event for up to
100 ms per subscriber whose buffer is full, so one stalled reader slows every
client of the daemon (and the calls that reader itself waits for)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import sandbox.proxy.watch as watch_mod
from sandbox.container_fate import Fate
from sandbox.labels import RUN
from sandbox.proxy.watch import SandboxWatch

NET = "tbx-net-r1"
SET = {"postgres": "a" * 64, "server-retail": "b" * 64}


class FakeStream:
    """What `DockerClient.events(decode=True)` returns: an iterator with `close()`."""

    def __init__(self) -> None:
        self.events: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.read = 0
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (event := self.events.get()) is not None:
            self.read += 1
            yield event

    def close(self) -> None:
        self.closed.set()
        self.events.put(None)


class FakeClient:
    def __init__(self) -> None:
        self.streams: list[FakeStream] = []
        self.opened = threading.Event()

    def events(self, **_: Any) -> FakeStream:
        stream = FakeStream()
        self.streams.append(stream)
        self.opened.set()
        return stream

    def close(self) -> None:
        pass


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    fake = FakeClient()
    monkeypatch.setattr(watch_mod.docker, "from_env", lambda: fake)
    # the full check: every watched container runs on its network
    monkeypatch.setattr(
        watch_mod,
        "_summaries",
        lambda ids, client=None: {
            cid: {"State": "running", "NetworkSettings": {"Networks": {NET: {}}}} for cid in ids
        },
    )
    return fake


@dataclass
class Watched:
    """A watch of one set (key k1) whose stream is open, and what it reported lost."""

    watch: SandboxWatch
    stream: FakeStream
    gone: list[tuple[str, str]]


@pytest.fixture
def watched(client: FakeClient) -> Iterator[Watched]:
    gone: list[tuple[str, str]] = []
    watch = SandboxWatch(lambda key, cause, fate: gone.append((key, cause)), check_every=60)
    watch.add("k1", SET, NET)
    try:
        assert client.opened.wait(5)
        yield Watched(watch, client.streams[0], gone)
    finally:
        watch.close()


def die(cid: str) -> dict[str, Any]:
    return {
        "Type": "container",
        "Action": "die",
        "Actor": {"ID": cid, "Attributes": {"name": cid[:6], RUN: "r"}},
    }


def start(cid: str) -> dict[str, Any]:
    attrs = {"name": cid[:6], RUN: "r"}  # a tbx container: its labels come with its events
    return {"Type": "container", "Action": "start", "Actor": {"ID": cid, "Attributes": attrs}}


def test_the_reader_keeps_reading_while_a_loss_is_being_described(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    asked: list[str] = []

    def slow_lost_container(containers: dict[str, str], client: Any = None) -> Fate:
        asked.extend(containers.values())
        release.wait(10)  # a daemon slow to answer an inspect
        return Fate("server-retail", "its server-retail container exited with code 1")

    monkeypatch.setattr(watch_mod, "lost_fate", slow_lost_container)
    stream, gone = watched.stream, watched.gone
    try:
        stream.events.put(die(SET["server-retail"]))
        wait_for(lambda: asked)  # being described, and blocked there
        for i in range(500):
            stream.events.put(start(f"{i:064x}"))
        wait_for(lambda: stream.read == 501)  # every later event read meanwhile
        assert gone == []
        release.set()
        wait_for(lambda: gone)
        assert gone == [("k1", "sandbox gone: its server-retail container exited with code 1")]
        assert watched.watch.known_alive({"x": f"{499:064x}"}, None)  # the later events counted too
    finally:
        release.set()


def test_a_second_loss_of_a_reported_set_is_not_described_again(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def lost_container(containers: dict[str, str], client: Any = None) -> Fate:
        asked.extend(containers.values())
        return Fate("server-retail", "exited")

    monkeypatch.setattr(watch_mod, "lost_fate", lost_container)
    watched.stream.events.put(die(SET["server-retail"]))
    wait_for(lambda: watched.gone)
    watched.stream.events.put(die(SET["postgres"]))
    wait_for(lambda: watched.stream.read == 2)
    time.sleep(0.1)
    assert len(watched.gone) == 1
    assert asked == [SET["server-retail"]]


def test_close_closes_the_stream_and_ends_every_thread(client: FakeClient) -> None:
    watch = SandboxWatch(lambda key, cause, fate: None, check_every=60)
    watch.start()
    assert client.opened.wait(5)
    wait_for(lambda: watch.following)
    watch.close()
    assert client.streams[0].closed.is_set()
    assert not watch.following
    assert all(not t.is_alive() for t in watch._threads)


def test_a_stream_opened_while_closing_is_closed_not_left_unread(
    client: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() may run while the reader is still opening its stream: that stream must
    not stay open (unread, it would hold the daemon back) once the reader is gone."""
    opening = threading.Event()
    proceed = threading.Event()
    plain_events = client.events

    def slow_events(**kw: Any) -> FakeStream:
        opening.set()
        proceed.wait(5)
        return plain_events(**kw)

    monkeypatch.setattr(client, "events", slow_events)
    watch = SandboxWatch(lambda key, cause, fate: None, check_every=60)
    watch.start()
    assert opening.wait(5)
    closer = threading.Thread(target=watch.close)
    closer.start()
    wait_for(lambda: watch._stop.is_set())
    proceed.set()  # the stream opens after close() began
    closer.join(5)
    wait_for(lambda: not any(t.is_alive() for t in watch._threads))
    assert len(client.streams) == 1
    assert client.streams[0].closed.is_set()


def test_a_slow_full_check_does_not_hold_the_reader(
    client: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check made when the stream (re)connects runs on the check thread."""
    release = threading.Event()
    checking = threading.Event()

    def slow_summaries(ids: list[str], client: Any = None) -> dict[str, dict[str, Any]]:
        checking.set()
        release.wait(10)  # a daemon slow to list containers
        return {cid: {"State": "running", "NetworkSettings": {"Networks": {NET: {}}}} for cid in ids}

    monkeypatch.setattr(watch_mod, "_summaries", slow_summaries)
    watch = SandboxWatch(lambda key, cause, fate: None, check_every=60)
    watch.add("k1", SET, NET)
    try:
        assert checking.wait(5)  # the check on connecting, well before check_every
        stream = client.streams[0]
        for i in range(100):
            stream.events.put(start(f"{i:064x}"))
        wait_for(lambda: stream.read == 100)
    finally:
        release.set()
        watch.close()


def test_the_first_event_of_a_loss_names_it_even_while_it_is_being_described(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed container's die comes before its network disconnect: the report names the
    container (from the daemon) although the disconnect was read while it was asked."""
    release = threading.Event()

    def slow_lost_container(containers: dict[str, str], client: Any = None) -> Fate:
        release.wait(10)
        return Fate("postgres", "its postgres container exited with code 137 (killed: SIGKILL)")

    monkeypatch.setattr(watch_mod, "lost_fate", slow_lost_container)
    stream, gone = watched.stream, watched.gone
    try:
        stream.events.put(die(SET["postgres"]))
        disconnect = {"name": NET, "container": SET["postgres"]}
        stream.events.put(
            {"Type": "network", "Action": "disconnect", "Actor": {"ID": "n", "Attributes": disconnect}}
        )
        wait_for(lambda: stream.read == 2)
        time.sleep(0.05)
        assert gone == []
        release.set()
        wait_for(lambda: gone)
        time.sleep(0.05)
        assert gone == [("k1", "sandbox gone: its postgres container exited with code 137 (killed: SIGKILL)")]
    finally:
        release.set()
