"""SGLang's gateway as a process: which command, its argv, and starting it (as a tracked, marked process).

Two gateways exist (reference §1.1): PyPI ``smg`` 1.x (``smg launch``) and its predecessor PyPI
``sglang-router`` 0.3.x (``python -m sglang_router.launch_router``; its wheel also installs an ``smg``
script, which ``smg --version`` tells apart: ``sgl-model-gateway 0.3.2`` against ``smg 1.13.0``). Both take
``--host/--port/--worker-urls`` and serve Prometheus metrics on a separate port (default 29000 for
every gateway on the host), so each launch gets free ports for both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.discovery import GatewayFlavor, Role
from pytest_sglang.server.runner import (
    LAUNCH_ENV,
    OWNER_ENV,
    PopenProcess,
    owner_marker,
    require_process_groups,
    spawn,
)
from pytest_sglang.sglang.gateway_args import check_gateway_flags, display_gateway_argv, register_gateway_secrets

__all__ = ["GatewayCommand", "GatewayMember", "check_args_for", "gateway_argv", "resolve_command", "start_gateway"]

#: Gateway flags the fleet sets itself (ports and workers); giving them in --sglang-gateway is an error.
OWNED_FLAGS = ("--host", "--port", "--worker-urls", "--prometheus-port", "--prometheus-host", "--pd-disaggregation",
               "--prefill", "--decode")
_VERSION_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class GatewayCommand:
    """The argv prefix that starts a gateway, with its flavour and version when known."""

    argv: tuple[str, ...]
    flavor: GatewayFlavor
    version: str | None = None

    def describe(self) -> str:
        """``smg 1.13.0`` style text."""
        return f"{self.flavor} {self.version}" if self.version else self.flavor


def _version_of(executable: str) -> tuple[GatewayFlavor, str | None] | None:
    """``smg --version`` -> (flavour, version): ``smg 1.13.0`` or ``sgl-model-gateway 0.3.2``."""
    try:
        done = subprocess.run([executable, "--version"], capture_output=True, timeout=_VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.decode(errors="replace").split()[:2]
    if len(words) == 2 and words[0] == "smg":
        return "smg", words[1]
    if len(words) == 2 and words[0] in ("sgl-model-gateway", "sglang-router"):
        return "sglang-router", words[1]
    return None


def resolve_command(given: tuple[str, ...] | None, python: str | None = None) -> GatewayCommand:
    """The gateway command: ``given`` (``--sglang-gateway-command``), else ``smg launch``, else the router module.

    ``python`` is the interpreter whose environment is searched first (next to it, then on PATH).
    """
    if given:
        head = given[0]
        path = shutil.which(head)
        if path is None:
            raise ConfigError("--sglang-gateway-command", " ".join(given), f"{head!r} is not an executable on PATH",
                              "install a gateway (pip install 'pytest-sglang[gateway]', which installs smg) or "
                              "give the full path, e.g. --sglang-gateway-command \"/venv/bin/smg launch\"")
        if any("sglang_router" in part for part in given):
            return GatewayCommand(given, "sglang-router", _distribution_version(path, "sglang-router"))
        known = _version_of(path) if Path(path).name in ("smg", "sglang-router") else None
        return GatewayCommand(given, known[0] if known else "smg", known[1] if known else None)
    interpreter = python or sys.executable
    folders = [str(Path(interpreter).parent), os.environ.get("PATH", "")]
    smg = shutil.which("smg", path=os.pathsep.join(folders))
    if smg is not None:
        known = _version_of(smg)
        if known is not None:
            return GatewayCommand((smg, "launch"), *known)
    if _module_exists(interpreter, "sglang_router"):
        return GatewayCommand((interpreter, "-m", "sglang_router.launch_router"), "sglang-router",
                              _distribution_version(interpreter, "sglang-router"))
    raise ConfigError("--sglang-workers", "N > 1", "a fleet needs SGLang's gateway and none is installed "
                      f"(no 'smg' next to {interpreter} or on PATH, no sglang_router module)",
                      "pip install 'pytest-sglang[gateway]' (installs smg), or pip install sglang-router, "
                      "or name it with --sglang-gateway-command")


def _module_exists(interpreter: str, module: str) -> bool:
    try:
        done = subprocess.run([interpreter, "-c", f"import importlib.util,sys; sys.exit(importlib.util.find_spec("
                               f"{module!r}) is None)"], capture_output=True, timeout=_VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _distribution_version(interpreter: str, distribution: str) -> str | None:
    """The installed version of ``distribution`` in ``interpreter``'s environment (None if unknown)."""
    try:
        done = subprocess.run([interpreter, "-c", "import importlib.metadata as m, sys; "
                               f"print(m.version({distribution!r}))"], capture_output=True, timeout=_VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.decode(errors="replace").strip()
    return text if done.returncode == 0 and text and len(text) < 40 else None


def check_gateway_args(args: tuple[str, ...]) -> None:
    """Refuse flags the fleet owns (ports, worker list): two values for one flag would be a silent mess."""
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in OWNED_FLAGS:
            raise ConfigError("--sglang-gateway", " ".join(args),
                              f"{flag} is set by pytest-sglang for a launched fleet (free ports, the launched workers)",
                              f"drop {flag}; to use your own gateway, start it yourself and attach with --sglang-url")


def check_args_for(command: GatewayCommand, args: tuple[str, ...]) -> list[str]:
    """The user's gateway args checked against the resolved gateway's recorded flags, before any worker starts.

    When the installed gateway is the recorded release, whatever its parser refuses is refused here
    (it would exit only after every worker had started); otherwise only typos are. Returns the lines
    about flags a newer gateway may know.
    """
    register_gateway_secrets(args)
    return check_gateway_flags(args, flavor=command.flavor, installed_version=command.version)


@dataclass(frozen=True)
class GatewayMember:
    """A worker the gateway is started with: its URL, role and (prefill) bootstrap port."""

    url: str
    role: Role = "regular"
    bootstrap_port: int | None = None


def gateway_argv(command: GatewayCommand, *, host: str, port: int, metrics_port: int, members: list[GatewayMember],
                 args: tuple[str, ...]) -> list[str]:
    """The full argv: the command, the fleet's own flags, then the user's gateway arguments.

    Regular workers go in ``--worker-urls``; a prefill-decode fleet uses ``--pd-disaggregation`` with one
    ``--prefill URL BOOTSTRAP_PORT`` and one ``--decode URL`` per worker (both gateways' syntax).
    """
    argv = [*command.argv, "--host", host, "--port", str(port), "--prometheus-host", host,
            "--prometheus-port", str(metrics_port)]
    regular = [m.url for m in members if m.role == "regular"]
    if regular:
        argv += ["--worker-urls", *regular]
    else:
        argv.append("--pd-disaggregation")
        for member in members:
            if member.role == "prefill":
                argv += ["--prefill", member.url, str(member.bootstrap_port) if member.bootstrap_port else "none"]
            else:
                argv += ["--decode", member.url]
    return [*argv, *args]


def start_gateway(argv: list[str], *, url: str, log_path: Path, env: dict[str, str]) -> PopenProcess:
    """Start the gateway in its own session, output appended to ``log_path``, marked for leftover cleanup."""
    require_process_groups("process")
    launch_id = uuid.uuid4().hex
    child = {**os.environ, **env, OWNER_ENV: owner_marker(), LAUNCH_ENV: launch_id}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    register_gateway_secrets(argv)
    with open(log_path, "ab") as log:
        # The gateway's own credential flags (--oracle-password, --tenant-api-key, abbreviated too) are
        # masked as the gateway reads them; the registry also hides the workers' keys.
        log.write(f"# pytest-sglang {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                  f"{' '.join(display_gateway_argv(argv))}\n".encode())
        log.flush()
        popen = spawn(argv, log=log, env=child, launch_id=launch_id)
    return PopenProcess(popen, url, log_path, launch_id, argv)
