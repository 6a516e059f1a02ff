"""env serve's session table (bench.env.sessions, #38 finding 3): what a session without an
episode may hold, per client and in all, and when it is closed. A clock the test turns
stands in for time.monotonic; episodes are stand-ins with `done` and `last_activity`."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bench.env.protocol import EnvError, ErrorCode
from bench.env.sessions import (
    ClientSessionsFull,
    EnvSession,
    Sessions,
    SessionsFull,
    client_key,
    default_per_client,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class StandInEpisode:
    last_activity: float
    done: bool = False


def table(per_client: int = 3, limit: int = 100, idle: float = 60.0) -> tuple[Sessions, Clock]:
    clock = Clock()
    return Sessions(per_client=per_client, idle_timeout=idle, limit=limit, clock=clock), clock


def play(sessions: Sessions, session: EnvSession, clock: Clock) -> StandInEpisode:
    episode = StandInEpisode(last_activity=clock.now)
    sessions.start_episode(session, episode)  # type: ignore[arg-type]
    return episode


def test_empty_mcp_sessions_never_refuse_a_socket_its_session() -> None:
    sessions, _ = table(per_client=2, limit=2)
    sessions.create("loopback")
    sessions.create("loopback")
    with pytest.raises(ClientSessionsFull):
        sessions.create("loopback")
    with pytest.raises(SessionsFull):
        sessions.create("10.0.0.9")  # the server's own bound on parked sessions
    own = [sessions.open_socket("loopback") for _ in range(50)]
    assert all(s.attached and not s.mcp for s in own)
    assert len(sessions.parked()) == 2


def test_the_per_client_cap_refuses_that_client_only_and_says_so() -> None:
    sessions, clock = table(per_client=2, idle=60)
    first = sessions.create("10.0.0.1")
    clock.now += 20
    sessions.create("10.0.0.1")
    with pytest.raises(ClientSessionsFull) as refused:
        sessions.create("10.0.0.1")
    exc = refused.value
    assert isinstance(exc, EnvError) and exc.code == ErrorCode.CAPACITY_REACHED
    assert exc.extra == {
        "scope": "client",
        "client_sessions": 2,
        "max_client_sessions": 2,
        "retry_after": 40.0,  # when the first of them idles out
    }
    assert "10.0.0.1" in exc.message and "2/2" in exc.message
    assert sessions.create("10.0.0.2").client == "10.0.0.2"
    # closing one frees the client's slot
    sessions.remove(first.id)
    assert sessions.create("10.0.0.1").mcp


def test_a_session_playing_an_episode_holds_no_parked_slot() -> None:
    sessions, clock = table(per_client=1)
    playing = sessions.create("loopback")
    episode = play(sessions, playing, clock)
    assert sessions.parked("loopback") == []
    other = sessions.create("loopback")  # the one parked slot is free
    with pytest.raises(ClientSessionsFull):
        sessions.create("loopback")
    episode.done = True  # its episode ended: parked again, counted again
    assert {s.id for s in sessions.parked("loopback")} == {playing.id, other.id}


def test_asking_a_parked_session_does_not_keep_it() -> None:
    """tools/list on a session without an episode (Sessions.get) refreshes nothing."""
    sessions, clock = table(idle=60)
    session = sessions.create("loopback")
    for _ in range(5):
        clock.now += 11
        assert sessions.get(session.id) is session  # a tools/list every 11 s
    clock.now += 5  # 60 s since it was made
    with pytest.raises(EnvError) as gone:
        sessions.get(session.id)
    assert gone.value.code == ErrorCode.SESSION_ERROR and gone.value.status == 404
    assert len(sessions) == 0


def test_episode_activity_keeps_a_session_and_its_end_starts_the_idle_clock() -> None:
    sessions, clock = table(idle=60)
    session = sessions.create("loopback")
    clock.now += 50
    episode = play(sessions, session, clock)
    clock.now += 500  # a live episode is never dropped here (its own idle timeout governs it)
    assert sessions.get(session.id) is session
    episode.last_activity = clock.now  # its last step
    episode.done = True
    clock.now += 59
    assert sessions.get(session.id) is session
    clock.now += 1
    with pytest.raises(EnvError):
        sessions.get(session.id)


def test_a_joined_socket_keeps_its_session_until_it_leaves() -> None:
    sessions, clock = table(per_client=1, idle=60)
    session = sessions.create("loopback")
    assert sessions.attach(session.id) is session
    clock.now += 600
    assert sessions.get(session.id) is session
    with pytest.raises(ClientSessionsFull) as refused:
        sessions.create("loopback")
    assert "retry_after" not in refused.value.extra  # no parked session of it can idle out
    session.attached = False  # the socket left
    with pytest.raises(EnvError):
        sessions.get(session.id)


def test_creating_drops_every_idle_session_first() -> None:
    sessions, clock = table(per_client=2, idle=60)
    sessions.create("loopback")
    sessions.create("loopback")
    clock.now += 60
    sessions.create("loopback")
    assert len(sessions) == 1


def test_the_default_cap_is_the_table_one_client_could_fill_before() -> None:
    assert default_per_client(2) == 80 and default_per_client(8) == 128


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("127.0.0.1", "loopback"),
        ("127.3.4.5", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "10.1.2.3"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::7", "2001:db8:1:2::/64"),
        (None, "unknown"),
        ("", "unknown"),
        ("testclient", "testclient"),
    ],
)
def test_a_client_is_its_address_every_loopback_one_and_an_ipv6_64(host: str | None, key: str) -> None:
    assert client_key(host) == key
