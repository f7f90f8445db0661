"""Local ports: a free one binds, and a listening socket is found with its owner's pid."""

from __future__ import annotations

import os
import socket

from pytest_sglang.sockets import free_port, listener_pids


def test_a_free_port_can_be_listened_on_and_its_listener_is_this_process() -> None:
    port = free_port()
    assert listener_pids(port) in (set(), None)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        pids = listener_pids(port)
        assert pids is None or os.getpid() in pids
    assert os.getpid() not in (listener_pids(port) or set())
