"""The Handle protocol (server/members.py): a lone server is its own one member; a fleet's are its workers.

The gates that judge each server's own figures (drain, probes, soak, requirements) loop over
``members()`` and never ask which kind of handle they hold.
"""

from __future__ import annotations

from pytest_sglang.fleet.discovery import WorkerEntry
from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
from pytest_sglang.gates.load.drain import targets
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.members import Handle


def _fleet() -> tuple[SGLangFleet, SGLangServer]:
    reachable = SGLangServer("http://127.0.0.1:31001", "attach")
    workers = [
        WorkerHandle(0, WorkerEntry(url="http://127.0.0.1:31001", role="prefill", is_healthy=True),
                     server=reachable),
        WorkerHandle(1, WorkerEntry(url="http://10.0.0.2:30000", role="decode", is_healthy=True),
                     server=None, unreachable="not reachable from here: no route to host"),
    ]
    return SGLangFleet(gateway=SGLangServer("http://127.0.0.1:30000", "attach"), flavor="smg", workers=workers), \
        reachable


def test_a_lone_server_is_its_own_one_member() -> None:
    server: Handle = SGLangServer("http://127.0.0.1:30000", "attach")
    (member,) = server.members()
    assert member.server is server and member.unreachable is None
    assert (member.label(), member.role) == (None, "regular")


def test_a_fleets_members_are_its_workers_each_named() -> None:
    fleet, reachable = _fleet()
    handle: Handle = fleet
    members = handle.members()
    assert list(members) == fleet.workers
    assert [m.label() for m in members] == ["prefill worker 0 (http://127.0.0.1:31001)",
                                            "decode worker 1 (http://10.0.0.2:30000)"]
    assert [m.server for m in members] == [reachable, None]
    assert [m.role for m in members] == ["prefill", "decode"]


def test_drain_reads_each_member_by_its_name() -> None:
    server = SGLangServer("http://127.0.0.1:30000", "attach")
    assert list(targets(server)) == ["http://127.0.0.1:30000"]
    fleet, _ = _fleet()
    assert list(targets(fleet)) == [w.name() for w in fleet.workers]
