"""The Session API's admission (#38 finding 7) without Docker: the session cap, and memory
charged per container set against a fixed budget (warm pools from the start, each
session's set, a golden replay once per key while a create may wait on it), refused as
AtCapacity (429, Retry-After) or, when one session can never fit, NeverFits (400)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.session_api.admission import UNMEASURED, AtCapacity, NeverFits, SessionAdmission
from bench.session_api.models import CreateBody
from bench.session_api.server_config import SessionServer
from bench.session_api.sessions import Session
from sandbox import SetUsage, store_usage
from sandbox.admission import ContainerMemory

IMAGES = {"servers": "tbx-servers:test", "postgres": "tbx-postgres:test"}


def _entry(domain: str = "retail", golden: str = "k1") -> SessionServer:
    # the golden key stands in the rows (the fake key function reads it back)
    return SessionServer(server=f"{domain}-server", domain=domain, rows={"golden": [{"key": golden}]})


def _admission(
    budget: int,
    *,
    warm: int = 0,
    domains: tuple[str, ...] = ("retail",),
    stored: set[str] | None = None,
) -> SessionAdmission:
    admission = SessionAdmission(
        4,
        warm=warm,
        domains=domains,
        images=lambda: dict(IMAGES),
        golden_key=lambda entry: str(entry.rows["golden"][0]["key"]),
        golden_stored=lambda key: key in (stored or set()),
        budget_bytes=budget,
    )
    admission.start()
    return admission


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBX_CACHE", str(tmp_path / "cache"))  # no measurement but the test's own


def _admit(admission: SessionAdmission, session: Session, entry: SessionServer) -> None:
    asyncio.run(admission.admit(session, entry))


def _session(sid: str = "s") -> Session:
    return Session(sid, CreateBody(session_id=sid, server_config={}, available_tools=[]))


def test_the_count_cap_refuses_with_a_retry_after() -> None:
    admission = _admission(10 * UNMEASURED)
    admission.check_count(3)
    with pytest.raises(AtCapacity) as refused:
        admission.check_count(4)
    assert refused.value.status == 429 and refused.value.retry_after > 0
    assert refused.value.message.startswith("Server at capacity: 4/4 sessions")


def test_a_golden_replay_is_charged_once_per_key_while_a_create_waits_on_it() -> None:
    stored: set[str] = set()  # the golden store's files
    admission = _admission(3 * UNMEASURED, stored=stored)
    first, second, third = _session("1"), _session("2"), _session("3")
    _admit(admission, first, _entry(golden="k1"))  # its set and the replay of k1
    assert admission.held() == 2 * UNMEASURED
    _admit(admission, second, _entry(golden="k1"))  # k1's replay is charged already
    assert admission.held() == 3 * UNMEASURED
    with pytest.raises(AtCapacity, match="memory: a retail session needs 512 MiB"):
        _admit(admission, third, _entry(golden="k1"))
    admission.created(first)  # the second still waits on the replay: it stays charged
    assert admission.held() == 3 * UNMEASURED
    stored.add("k1")  # the replay is done and saved
    admission.created(second)
    assert admission.held() == 2 * UNMEASURED
    _admit(admission, third, _entry(golden="k1"))  # its set alone now
    assert admission.held() == 3 * UNMEASURED
    for session in (first, second, third):
        admission.release(session)
    admission.release(_session("never"))  # a session never admitted: nothing to give back
    assert admission.held() == 0


def test_a_stored_golden_costs_no_replay() -> None:
    admission = _admission(UNMEASURED, stored={"k1"})
    _admit(admission, _session(), _entry(golden="k1"))
    assert admission.held() == UNMEASURED


def test_a_failed_create_gives_back_its_set_and_its_replay() -> None:
    admission = _admission(2 * UNMEASURED)
    failed = _session()
    _admit(admission, failed, _entry(golden="k2"))
    admission.release(failed)
    assert admission.held() == 0
    _admit(admission, _session(), _entry(golden="k3"))


def test_warm_pools_are_charged_from_the_start() -> None:
    admission = _admission(4 * UNMEASURED, warm=1, domains=("retail", "consulting"))
    assert admission.held() == 2 * UNMEASURED
    _admit(admission, _session("1"), _entry(golden="k1"))  # a set and its replay beside the pools
    with pytest.raises(AtCapacity):
        _admit(admission, _session("2"), _entry(golden="k2"))
    small = _admission(3 * UNMEASURED, warm=1, domains=("retail", "consulting"))
    with pytest.raises(NeverFits, match=r"nothing held but the warm pools \(1 a domain\)"):
        _admit(small, _session(), _entry(golden="k1"))  # the pools stay: retrying cannot help


def test_a_session_that_can_never_fit_is_no_retry() -> None:
    admission = _admission(UNMEASURED)
    with pytest.raises(NeverFits) as refused:
        _admit(admission, _session(), _entry(golden="k1"))  # its set + its replay, with nothing else held
    assert refused.value.status == 400 and not isinstance(refused.value, AtCapacity)
    assert refused.value.message.startswith("Cannot serve this session: memory")
    assert refused.value.message.endswith("with nothing held")


def test_a_measured_domain_is_charged_its_need() -> None:
    usage = SetUsage(
        domain="retail",
        containers={
            role: ContainerMemory(usage=60 * 2**20, working_set=40 * 2**20) for role in ("db", "server")
        },
        images=IMAGES,
    )
    store_usage(usage, typesense=True)  # what `tbx run` measured for these images
    admission = _admission(10 * UNMEASURED, domains=("retail", "consulting"))
    assert admission.need_of("retail") == usage.need_bytes < UNMEASURED
    assert admission.need_of("consulting") == UNMEASURED
    _admit(admission, _session(), _entry(golden="k1"))
    assert admission.held() == 2 * usage.need_bytes


def test_the_budget_is_what_is_available_less_the_reserve() -> None:
    admission = SessionAdmission(
        4,
        warm=0,
        domains=("retail",),
        images=lambda: dict(IMAGES),
        golden_key=lambda entry: "k",
        golden_stored=lambda key: False,
        available=lambda: 20 * 2**30,
    )
    admission.start()
    assert admission.budget == 19 * 2**30  # 5 % kept free (at least 1 GiB)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_create_the_queue_cannot_serve_within_its_timeout_is_refused_at_once() -> None:
    """The burst rule: creates finish every 5 s here; with 10 booting ahead a new one would
    wait about 55 s, so a session whose timeout is 30 s is refused (429, Retry-After about
    how much too long), one whose timeout is 120 s is admitted; nothing is refused before
    enough creates have finished to know the rate, nor with none booting ahead."""
    clock = FakeClock()
    admission = SessionAdmission(
        64,
        warm=0,
        domains=("retail",),
        images=lambda: dict(IMAGES),
        golden_key=lambda entry: "k",
        golden_stored=lambda key: True,
        budget_bytes=100 * UNMEASURED,
        clock=clock,
    )
    admission.start()
    booting = [_session(str(i)) for i in range(14)]
    for s in booting:
        _admit(admission, s, _entry(golden="k"))
    admission.check_queue(1.0)  # no rate known yet: nothing refused on this ground
    for s in booting[:4]:  # four creates finish, 5 s apart
        clock.now += 5.0
        admission.created(s)
    assert admission.queue_wait() == pytest.approx((10 + 1) * 5.0)
    with pytest.raises(AtCapacity) as refused:
        admission.check_queue(30.0)
    assert refused.value.status == 429
    assert refused.value.retry_after == 25  # 55 s ahead, 30 s of patience
    assert "10 creates are booting ahead" in refused.value.message
    admission.check_queue(120.0)
    for s in booting[4:]:  # the rest fail or go: the queue drains
        admission.release(s)
    admission.check_queue(4.0)  # its own boot alone takes longer, but waiting cannot help that
    clock.now += 3600.0  # an idle hour, then a burst: the rate is the creates' own spacing
    for s in booting[:3]:
        _admit(admission, s, _entry(golden="k"))
    assert admission.queue_wait() == pytest.approx((3 + 1) * 5.0)
