"""Restart a launched server in place: stop it, start the same launch on the same port, same handle.

What a gate needs to prove that something outlives the process (the hierarchical cache's storage
tier, :mod:`pytest_sglang.gates.production.storage_restart`). An attached server is never restarted: pytest-sglang
never signals a process it did not start.
"""

from __future__ import annotations

from pytest_sglang.errors import ConfigError
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.start import launch

#: Runners whose server comes back on the same address when started on the same port.
RESTARTABLE = ("process", "simulator")
STOP_GRACE_S = 10.0


def restartable(server: object) -> str | None:
    """Why ``server`` cannot be restarted in place, or None when it can."""
    if not isinstance(server, SGLangServer):
        return f"{type(server).__name__} is not a single launched server"
    if server.process is None or server.config is None:
        return "the server was attached (--sglang-url): pytest-sglang never restarts a process it did not start"
    if server.config.runner not in RESTARTABLE:
        return (f"runner {server.config.runner!r} may come back on another address; restarts are supported for "
                f"{' and '.join(RESTARTABLE)} launches")
    return None


def restart_in_place(server: SGLangServer) -> None:
    """Stop ``server`` and start its launch again on its port; ``server`` then drives the new process."""
    why = restartable(server)
    if why is not None:
        raise ConfigError("restart", server.describe(), why, "launch the server with the plugin (--sglang-launch)")
    assert server.config is not None  # restartable() checked it
    server.stop(grace_s=STOP_GRACE_S)
    server.adopt(launch(server.config, port=server.server_url.port, preflight_done=True))
