"""Which `/session_create` the Session API takes: a cap on sessions and admission by
memory, refused at once with `AtCapacity` (HTTP 503 and Retry-After) rather than
booted into a machine that cannot hold them (#38 finding 7: 10 concurrent creates
were 39 containers, and nothing bounded them).

- Count: at most `max_sessions` sessions, live or being created, whatever memory
  says: a bound on containers, networks and connections (`--max-sessions`).
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.defaults import RETRY_AFTER
from bench.session_api.models import ApiError
from bench.session_api.server_config import SessionServer
from sandbox.admission import MIB, available_memory, cached_usage, measure_set, reserve_for

if TYPE_CHECKING:
    from bench.session_api.sessions import Session

log = logging.getLogger(__name__)

# Charged per set of a domain not measured yet: about 2.5x the largest need measured
# (169-200 MiB a set, docs/performance.md), so a first burst cannot overcommit.
UNMEASURED = 512 * MIB


class AtCapacity(ApiError):
    """The server holds what it can: retry after `retry_after` s (HTTP 503)."""

    def __init__(self, message: str, retry_after: int = RETRY_AFTER):
        super().__init__(message, 503)
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
        if not stored:
            self._replays.setdefault(key, _Replay(domain)).waiting.add(session)
            self._golden[session] = key

    def created(self, session: Session) -> None:
        """The create is done: its golden state is there, no replay waits on its behalf;
        the first live set of a domain not measured yet is measured."""
        self._replay_done(session)
        domain = self._holders.get(session)
        if domain is not None and session.live is not None and domain not in self.need:
            task = asyncio.create_task(self.learn(domain, session.live.lease.containers))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def release(self, session: object) -> None:
        """The session is gone (or its create failed): its charge ends."""
        self._replay_done(session)
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
