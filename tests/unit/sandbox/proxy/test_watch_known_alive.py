"""What the sandbox watch's event stream saw of a set decides whether a registration must
ask the daemon (`SandboxWatch.known_alive`), and a loss it saw before the set was watched
is reported as soon as it is. Events are fed as Docker's stream decodes them."""

from __future__ import annotations

from typing import Any

from sandbox.labels import RUN
from sandbox.proxy.watch import REMEMBER_LOSSES, SandboxWatch

NET = "tbx-net-a1"
SET = {"postgres": "c" * 64, "server-retail": "d" * 64}


def container(action: str, cid: str, *, tbx: bool = True, **attrs: str) -> dict[str, Any]:
    """A container event as Docker sends it: with the container's labels (tbx's, unless `tbx` is False)."""
    labels = {RUN: "run-a1", "tbx.attempt": "att-a1"} if tbx else {"com.example.app": "other"}
    return {
        "Type": "container",
        "Action": action,
        "Actor": {"ID": cid, "Attributes": {"name": cid[:6], **labels, **attrs}},
    }


def network(action: str, name: str, container_id: str = "") -> dict[str, Any]:
    attrs = {"name": name, "type": "bridge", **({"container": container_id} if container_id else {})}
    return {"Type": "network", "Action": action, "Actor": {"ID": "n" * 64, "Attributes": attrs}}


def booted(watch: SandboxWatch, containers: dict[str, str] = SET, net: str = NET) -> None:
    """The events of a set's boot, in the order Docker sends them."""
    watch._on_event(network("create", net))
    for cid in containers.values():
        watch._on_event(container("create", cid))
        watch._on_event(network("connect", net, cid))
        watch._on_event(container("start", cid))


def new_watch() -> tuple[SandboxWatch, list[tuple[str, str]]]:
    gone: list[tuple[str, str]] = []
    return SandboxWatch(lambda key, cause, fate: gone.append((key, cause))), gone


def test_a_set_whose_boot_the_stream_saw_is_known_alive() -> None:
    watch, _ = new_watch()
    assert not watch.known_alive(SET, NET)  # nothing seen yet: ask the daemon
    booted(watch)
    assert watch.known_alive(SET, NET)
    assert watch.known_alive(SET, None)


def test_a_set_started_before_the_stream_is_unknown() -> None:
    watch, _ = new_watch()
    watch._on_event(network("create", NET))
    watch._on_event(container("start", SET["postgres"]))
    watch._on_event(network("connect", NET, SET["postgres"]))
    # the server's start was not seen (it started before the stream connected)
    assert not watch.known_alive(SET, NET)


def test_a_container_on_another_network_is_not_known_attached() -> None:
    watch, _ = new_watch()
    booted(watch, net="tbx-net-other")
    watch._on_event(network("create", NET))
    assert watch.known_alive(SET, "tbx-net-other")
    assert not watch.known_alive(SET, NET)


def test_die_pause_destroy_disconnect_or_network_removal_make_it_unknown() -> None:
    cases = [
        [container("die", SET["server-retail"], exitCode="137")],
        [container("pause", SET["postgres"])],
        [container("destroy", SET["postgres"])],
        [network("disconnect", NET, SET["server-retail"])],
        [network("destroy", NET)],
    ]
    for events in cases:
        watch, _ = new_watch()
        booted(watch)
        for event in events:
            watch._on_event(event)
        assert not watch.known_alive(SET, NET), events


def test_a_loss_seen_before_the_set_is_watched_is_reported_when_it_is() -> None:
    watch, gone = new_watch()
    booted(watch)
    watch._on_event(container("die", SET["server-retail"], exitCode="1", name="srv"))
    watch.add("attempt-1", SET, NET)
    try:
        assert gone == [("attempt-1", "sandbox gone: container srv got a die event")]
    finally:
        watch.close()


def test_a_network_left_before_the_set_is_watched_is_reported_when_it_is() -> None:
    watch, gone = new_watch()
    booted(watch)
    watch._on_event(network("disconnect", NET, SET["postgres"]))
    watch.add("attempt-1", SET, NET)
    try:
        assert gone == [("attempt-1", f"sandbox gone: a container left its network {NET}")]
    finally:
        watch.close()


def test_a_new_network_of_a_removed_ones_name_is_not_lost() -> None:
    watch, gone = new_watch()
    booted(watch)
    watch._on_event(network("destroy", NET))
    other = {"postgres": "e" * 64}
    booted(watch, other)  # the name is used again by a new set
    assert watch.known_alive(other, NET)
    watch.add("attempt-2", other, NET)
    try:
        assert gone == []
    finally:
        watch.close()


def test_losses_are_remembered_up_to_a_bound() -> None:
    watch, _ = new_watch()
    for i in range(REMEMBER_LOSSES + 10):
        watch._on_event(container("destroy", f"{i:064x}"))
    assert len(watch._seen.lost) == REMEMBER_LOSSES
    assert f"{0:064x}" not in watch._seen.lost  # the oldest went first


def churn(watch: SandboxWatch, n: int) -> None:
    """Another client's containers on a network of its own, each created, connected, started,
    killed and removed, as a shared daemon's stream carries them."""
    watch._on_event(network("create", "their-net"))
    for i in range(n):
        cid = f"{i:064x}"
        for action in ("create", "connect", "start", "die", "disconnect", "destroy"):
            if action in ("connect", "disconnect"):
                watch._on_event(network(action, "their-net", cid))
            else:
                watch._on_event(container(action, cid, tbx=False, exitCode="0"))
    watch._on_event(network("destroy", "their-net"))


def test_other_clients_events_are_not_remembered() -> None:
    watch, _ = new_watch()
    churn(watch, 50)
    seen = watch._seen
    assert (seen.ours, seen.running, seen.attached, seen.our_networks, dict(seen.lost)) == (
        set(),
        set(),
        set(),
        set(),
        {},
    )
    assert seen.networks == set()  # created and removed: no name kept either
    # A running container of another client's is never taken for known alive.
    watch._on_event(container("start", "f" * 64, tbx=False))
    assert not watch.known_alive({"x": "f" * 64}, None)


def test_a_tbx_loss_outlives_any_amount_of_other_clients_churn() -> None:
    watch, gone = new_watch()
    booted(watch)
    watch._on_event(container("die", SET["server-retail"], exitCode="1", name="srv"))
    churn(watch, REMEMBER_LOSSES + 10)  # once enough to push it out of the bounded memory
    assert list(watch._seen.lost) == [SET["server-retail"]]
    watch.add("attempt-1", SET, NET)
    try:
        assert gone == [("attempt-1", "sandbox gone: container srv got a die event")]
    finally:
        watch.close()


def test_a_tbx_network_removed_is_remembered_and_anothers_is_not() -> None:
    watch, _ = new_watch()
    booted(watch)
    watch._on_event(network("create", "their-net"))
    watch._on_event(network("destroy", "their-net"))
    watch._on_event(network("destroy", NET))
    assert list(watch._seen.lost) == [NET]
