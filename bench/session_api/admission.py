"""Which `/session_create` the Session API takes: a cap on sessions and admission by
memory, and a boot queue it can serve in time, refused at once with `AtCapacity`
(HTTP 429 and Retry-After) rather than booted into a machine that cannot hold them
(#38 finding 7: 10 concurrent creates were 39 containers, and nothing bounded them)
or left waiting past the client's patience (#38 bursts: on a busy machine 144 creates
at once waited past the trainer's 600 s).

429, not 503: the reference clients retry a 429 for as long as it comes, at least
`min(Retry-After, 32)` s apart, but a 503 only five times within about 30 s, ignoring
its Retry-After (the spec's section 7.1.3), so a 503 turned a create that would have
been served a minute later into a failed rollout.

- Count: at most `max_sessions` sessions, live or being created, whatever memory
  says: a bound on containers, networks and connections (`--max-sessions`).
- Queue: a create is refused when the creates still booting ahead of it, at the rate
  creates have finished lately (the last QUEUE_WINDOW completions, at least
  QUEUE_SAMPLES of them), would keep it waiting past its own session `timeout` (the
  trainer sends 0.9 x its HTTP timeout); Retry-After says when the queue should have
  shrunk enough. Before enough creates have finished, or with none booting ahead (then
  waiting cannot help), nothing is refused on this ground.
- Memory: `tbx run`'s admission by measured use (sandbox.admission). Every container
  set is charged its domain's need (working set + headroom + per-container overhead)
  against the memory available at start less the reserve; charged are the warm
  pools of every domain (from the start), each session's set, and a create's golden
  replay while it may run (once per golden key: the creates of one task share it).

A domain's need is `tbx run`'s cached measurement for these images when there is
one; else it is measured on the first session of the domain once that is up (kept
in this process: `tbx run`'s cache holds measurements taken after golden calls), and
`UNMEASURED` is charged until then.

The budget is fixed at start, as `tbx run` fixes its own: memory other processes
take later is not seen.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.defaults import RETRY_AFTER
from bench.session_api.models import ApiError
from bench.session_api.server_config import SessionServer
from sandbox import MIB, available_memory, cached_usage, measure_set, reserve_for

log = logging.getLogger(__name__)

# Charged per set of a domain not measured yet: about 2.5x the largest need measured
# (169-200 MiB a set, docs/performance.md), so a first burst cannot overcommit.
UNMEASURED = 512 * MIB
# The boot rate is read off the last QUEUE_WINDOW creates that finished, once there are
# QUEUE_SAMPLES of them; a Retry-After beyond RETRY_AFTER_MAX is honoured as 32 s by the
# reference clients anyway.
QUEUE_WINDOW = 16
QUEUE_SAMPLES = 4
RETRY_AFTER_MAX = 32


class AtCapacity(ApiError):
    """The server holds what it can: retry after `retry_after` s (HTTP 429: see the module doc)."""

    def __init__(self, message: str, retry_after: int = RETRY_AFTER):
        super().__init__(message, 429)
        self.retry_after = retry_after


class NeverFits(ApiError):
    """One session of this domain exceeds the whole memory budget: retrying cannot help (400)."""


@dataclass
class _Replay:
    domain: str
    waiting: set[object] = field(default_factory=set)  # the creates that may wait on it


class SessionAdmission:
    def __init__(
        self,
        max_sessions: int,
        *,
        warm: int,
        domains: Sequence[str],
        images: Callable[[], dict[str, str]],
        golden_key: Callable[[SessionServer], str],
        golden_stored: Callable[[str], bool],
        budget_bytes: int | None = None,
        available: Callable[[], int] = available_memory,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.max_sessions = max_sessions
        self.warm = warm
        self.domains = list(domains)
        self._images = images
        self._golden_key = golden_key
        self._golden_stored = golden_stored
        self._budget_bytes = budget_bytes
        self._available = available
        self.budget = 0
        self.need: dict[str, int] = {}  # domain -> bytes a set of it is charged, once measured
        self._holders: dict[object, str] = {}  # session -> its domain
        self._golden: dict[object, str] = {}  # session -> the golden key it may wait on
        self._replays: dict[str, _Replay] = {}  # golden key -> the replay charged
        self._measuring: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._clock = clock
        self._booting: set[object] = set()  # admitted creates not yet done
        self._finished: deque[float] = deque(maxlen=QUEUE_WINDOW)  # when the last creates finished

    def start(self) -> None:
        """Fix the budget and read the measurements `tbx run` cached for these images."""
        if self._budget_bytes is not None:
            self.budget = self._budget_bytes
        else:
            available = self._available()
            self.budget = available - reserve_for(available)
        images = self._images()
        for domain in self.domains:
            usage = cached_usage(domain, images, typesense=True)
            if usage is not None:
                self.need[domain] = usage.need_bytes

    def need_of(self, domain: str) -> int:
        return self.need.get(domain, UNMEASURED)

    def held(self) -> int:
        """Bytes charged now: warm pools, sessions, golden replays that may run."""
        warm = self.warm * sum(self.need_of(d) for d in self.domains)
        sessions = sum(self.need_of(d) for d in self._holders.values())
        replays = sum(self.need_of(r.domain) for r in self._replays.values())
        return warm + sessions + replays

    # ---- checks -------------------------------------------------------------------
    def check_count(self, sessions: int) -> None:
        """Before a create: `sessions` are live or being created."""
        if sessions >= self.max_sessions:
            raise AtCapacity(
                f"Server at capacity: {sessions}/{self.max_sessions} sessions (--max-sessions); "
                "retry later, or destroy sessions"
            )

    def queue_wait(self) -> float | None:
        """Seconds a create admitted now would wait for the ones booting ahead of it and its
        own boot, at the rate the last creates finished (their own spacing, so an idle spell
        before a burst does not read as a slow machine); None while that rate is unknown."""
        if len(self._finished) < QUEUE_SAMPLES:
            return None
        span = self._finished[-1] - self._finished[0]
        if span <= 0:
            return None
        return (len(self._booting) + 1) * span / (len(self._finished) - 1)

    def check_queue(self, patience: float) -> None:
        """Before a create: refuse it at once when the queue ahead would keep it waiting
        longer than `patience` s (its session timeout), rather than let its client time out."""
        wait = self.queue_wait()
        # With nothing booting ahead, waiting cannot shorten the wait: never refused then.
        if wait is None or wait <= patience or not self._booting:
            return
        retry = min(RETRY_AFTER_MAX, max(RETRY_AFTER, math.ceil(wait - patience)))
        raise AtCapacity(
            f"Server at capacity: {len(self._booting)} creates are booting ahead, about {wait:.0f} s at the "
            f"rate creates finish now, longer than this session's timeout ({patience:.0f} s); retry later",
            retry_after=retry,
        )

    async def admit(self, session: object, entry: SessionServer) -> None:
        """Charge `session`'s set (and its golden replay, unless stored or charged
        already), or refuse it. Released by `release`; the replay's share by `created`."""
        key = await asyncio.to_thread(self._golden_key, entry)
        stored = key not in self._replays and await asyncio.to_thread(self._golden_stored, key)
        # from here on no await: the check and the charge are one step
        domain = entry.domain
        replay = not stored and key not in self._replays
        need = self.need_of(domain) * (2 if replay else 1)
        held = self.held()
        if held + need > self.budget:
            others = held - self.warm * sum(self.need_of(d) for d in self.domains)
            message = (
                f"memory: a {domain} session needs {need / MIB:.0f} MiB "
                f"({'its set and its golden replay' if replay else 'its container set'}), "
                f"{max(0, self.budget - held) / MIB:.0f} MiB of the {self.budget / MIB:.0f} MiB budget "
                "is left (memory available at start less the reserve)"
            )
            if others == 0:  # only the warm pools are held, and they stay
                pools = f" but the warm pools ({self.warm} a domain)" if self.warm else ""
                raise NeverFits(f"Cannot serve this session: {message}, with nothing held{pools}")
            raise AtCapacity(f"Server at capacity: {message}; retry later, or destroy sessions")
        self._holders[session] = domain
        self._booting.add(session)
        if not stored:
            self._replays.setdefault(key, _Replay(domain)).waiting.add(session)
            self._golden[session] = key

    def created(self, session: object, containers: Mapping[str, str] | None = None) -> None:
        """The create is done: its golden state is there, no replay waits on its behalf;
        the first live set (`containers`: role -> container id) of a domain not measured
        yet is measured."""
        self._replay_done(session)
        if session in self._booting:
            self._booting.discard(session)
            self._finished.append(self._clock())
        domain = self._holders.get(session)
        if domain is not None and containers is not None and domain not in self.need:
            task = asyncio.create_task(self.learn(domain, containers))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def release(self, session: object) -> None:
        """The session is gone (or its create failed): its charge ends."""
        self._replay_done(session)
        self._booting.discard(session)
        self._holders.pop(session, None)

    def _replay_done(self, session: object) -> None:
        key = self._golden.pop(session, None)
        replay = self._replays.get(key) if key is not None else None
        if key is not None and replay is not None:
            replay.waiting.discard(session)
            if not replay.waiting:
                del self._replays[key]

    # ---- measuring ------------------------------------------------------------------
    async def learn(self, domain: str, containers: Mapping[str, str]) -> None:
        """Measure a live set of `domain` (role -> container id) unless it was measured."""
        if domain in self.need or domain in self._measuring:
            return
        self._measuring.add(domain)
        try:
            usage = await asyncio.to_thread(measure_set, domain, dict(containers), self._images())
            self.need[domain] = usage.need_bytes
            log.info("admission: a %s set is charged %.0f MiB", domain, usage.need_bytes / MIB)
        except Exception:
            log.warning("admission: measuring a %s set failed; it stays charged as unmeasured", domain)
        finally:
            self._measuring.discard(domain)
