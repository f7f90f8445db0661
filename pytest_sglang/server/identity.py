"""Is the server answering the one we launched?

A taken ``--port`` once let every gate pass against whatever already held it, while the launched
server died with "address already in use".

Two defences:

* before the start, a ``--port`` given in the launch args must be free (:func:`check_port_free`);
* once the server answers, it must be ours (:func:`mismatch`), proven in two ways:

  1. the listening socket belongs to the launched process tree (psutil). This is the proof that
     tells two identical servers apart (two CI jobs launching the same model on one fixed port, or
     a server that binds the port after our launch while ours still loads). It needs a local pid,
     so it covers the process and simulator runners and launched fleet workers. Any listener we can
     see outside our tree is foreign, whatever its age; so is a listener whose owner we may not see
     (another user's) while every process of our tree is readable. Only when the socket table is
     closed to us (macOS without root), or the holder is docker-proxy, is the question left to the
     second check.
  2. ``/server_info`` reflects our launch: its ``port`` is the port we told the server and its
     ``model_path`` the one we launched. Real SGLang 0.5.23, the simulator and a container alike
     serve both fields as given on the command line (reference capture
     ``captures/basic/server_info.txt``). This covers the docker runner on a bridge network, whose
     published host port is picked and held by the engine (a taken port is refused by the engine
     itself). With ``--sglang-docker-network host`` the first check applies to the container's init
     process tree (its host pid, from the engine).

A nonce was considered and rejected: SGLang has no flag that echoes arbitrary text harmlessly
(``--served-model-name`` changes what clients must send), and it exposes the environment only with
``SGLANG_EXPOSE_OWN_ENV_VARS=1``, which would publish every secret in the environment.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping

import psutil

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.probe import Expected, Target
from pytest_sglang.sglang import masks
from pytest_sglang.sockets import listener_pids

_WILDCARD = ("0.0.0.0", "::", "")
_SKIP = "the plugin picks a free port when --port is left out"


def check_port_free(host: str, port: int) -> None:
    """Raise a ConfigError naming ``--port`` when ``host:port`` is taken (nothing is started then)."""
    if port == 0:
        raise ConfigError("--port", port, "pytest-sglang must know the server's port before it starts",
                          f"give a port from 1 to 65535, or drop --port ({_SKIP})")
    if not port_taken(host, port):
        return
    holder = describe_listener(port)
    raise ConfigError("--port", port, f"port {port} on {host or '0.0.0.0'} is already in use{holder}, so the "
                      "launched server would die with 'address already in use' while the gates tested "
                      "whatever answers there",
                      f"stop what listens there (ss -ltnp 'sport = :{port}'), or drop --port from "
                      f"--sglang-launch ({_SKIP})")


def port_taken(host: str, port: int) -> bool:
    """True if the server could not bind ``host:port`` now (or something accepts connections there)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As uvicorn does: SO_REUSEADDR, so a port in TIME_WAIT is not mistaken for a taken one.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or "0.0.0.0", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE or exc.errno == errno.EACCES:
                return True
            return False  # not a local address (EADDRNOTAVAIL): the server's own bind will say so
    return _accepts(host, port)


def _accepts(host: str, port: int) -> bool:
    # A listener on another address of the same port (e.g. [::]) still answers the loopback URL.
    target = "127.0.0.1" if host in _WILDCARD else host
    try:
        with socket.create_connection((target, port), timeout=0.5):
            return True
    except OSError:
        return False


def describe_listener(port: int) -> str:
    """`` (pid 4242: python -m http.server)`` when the listener is visible to us, else ``""``."""
    for proc in listeners(port):
        return f" (by pid {proc.pid}: {_cmdline(proc)})"
    return ""


def listeners(port: int) -> list[psutil.Process]:
    """The processes listening on TCP ``port`` that we may see (our own user's, or all as root)."""
    out = []
    for pid in (listener_pids(port) or set()) - {None}:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return out


def mismatch(target: Target, info: Mapping[str, object] | None) -> str | None:
    """Why the answering server is not the launched one, or None when it is (or cannot be told)."""
    expected = target.expected
    if expected is None:
        return None
    pid = _listener_root(target.process)
    if pid is not None:
        ours, reason = _socket_verdict(pid, expected)
        if ours is not None:
            return None if ours else reason
    return _info_mismatch(expected, info)


def _listener_root(process: RunningProcess | None) -> int | None:
    """The host pid whose process tree must hold the listening socket, when one is known.

    Each runner says: a container's init with ``--network host``, a Ray server's pid only when its
    node is this host.
    """
    return process.listener_root_pid() if process is not None else None


def _socket_verdict(root_pid: int, expected: Expected) -> tuple[bool | None, str]:
    """(True, "") our tree listens; (False, why) another process does; (None, "") cannot be told.

    Not by age: a server that binds the port after our launch, while ours still loads (real SGLang
    binds only once the weights are in), is as foreign as one that ran before it.
    """
    tree = _tree(root_pid)
    ours = {proc.pid for proc in tree}
    hidden = False  # a process of our tree whose sockets we may not read (e.g. started through sudo)
    for proc in tree:
        listens = _listens(proc, expected.port)
        if listens:
            return True, ""
        hidden = hidden or listens is None
    holders = listener_pids(expected.port)
    if holders is None:
        return None, ""  # the system's socket table is closed to us (macOS without root)
    for pid in sorted(p for p in holders if p is not None and p not in ours):
        holder = _process(pid)
        if holder is None or _is_docker_proxy(holder):
            continue  # gone, or a container's published port (--sglang-command "docker run ..."): /server_info says
        return False, (f"port {expected.port} is held by pid {pid} ({_cmdline(holder)}), which is neither the "
                       "launched process nor one it started")
    if None in holders and not hidden:
        return False, (f"port {expected.port} is held by a process of another user, outside the launched "
                       "process tree")
    return None, ""


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _is_docker_proxy(proc: psutil.Process) -> bool:
    try:
        return proc.name() == "docker-proxy"
    except psutil.Error:
        return False


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _listens(proc: psutil.Process, port: int) -> bool | None:
    """True/False, or None when the process's sockets may not be read."""
    try:
        conns = proc.net_connections(kind="inet")
    except psutil.AccessDenied:
        return None
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


def _info_mismatch(expected: Expected, info: Mapping[str, object] | None) -> str | None:
    if info is None:
        return None  # validation off and not JSON: nothing to compare
    port = info.get("port")
    if isinstance(port, int) and port != expected.port:
        return (f"its /server_info says port {port}, but the launched server was told --port "
                f"{expected.port} (a proxy or another server answers)")
    model = info.get("model_path")
    if expected.model_path is not None and isinstance(model, str) and model != expected.model_path:
        return (f"its /server_info says model_path {model!r}, but the launched server was given "
                f"--model-path {expected.model_path!r}")
    return None


def _cmdline(proc: psutil.Process) -> str:
    try:
        # Another server's command line may hold its --api-key: masked like our own.
        text = " ".join(redaction.clean_text(" ".join(masks.scrub_argv(proc.cmdline()))).split()) or proc.name()
    except psutil.Error:
        return "command unknown"
    return text if len(text) <= 120 else text[:117] + "..."
