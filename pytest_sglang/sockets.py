"""Local TCP ports: one that is free right now, and which processes listen on one.

The lowest layer (psutil only): the server launcher and the simulator's own light launcher both use it.
"""

from __future__ import annotations

import socket

import psutil

__all__ = ["free_port", "listener_pids"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now (bind port 0 and read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def listener_pids(port: int) -> set[int | None] | None:
    """The pids listening on TCP ``port`` (None for a socket whose owner we may not see), or None if unknown."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None  # e.g. macOS without root
    return {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port}
