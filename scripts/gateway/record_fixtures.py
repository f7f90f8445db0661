"""Record what SGLang's gateways answer about their fleet, for the fleet engine's unit tests.

    python scripts/gateway/record_fixtures.py --gateway "smg launch" --name smg-1.13.0-sim \\
        --worker-url http://127.0.0.1:31000 --worker-url http://127.0.0.1:31001 [--kill PID=URL]

Starts the gateway (free ports, a 1 s health check) in front of the given workers, waits until
``/readiness`` is 200, and writes ``fixtures/gateway/<name>.json``: the gateway's ``--version``,
``GET /workers``, ``GET /readiness`` and ``GET /get_server_info``. With ``--kill PID=URL`` it then
SIGKILLs that worker process and also records ``/readiness`` and ``/workers`` once the gateway has
marked the worker at URL unhealthy. Worker and gateway addresses are replaced by placeholders (``http://WORKER0`` ...),
so the files do not depend on the ports of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "gateway"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(client: httpx.Client, path: str) -> dict[str, Any]:
    response = client.get(path)
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return {"status": response.status_code, "body": body}


def _wait(client: httpx.Client, done: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if done(client):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError("the gateway did not reach the expected state")


def _anonymize(payload: Any, urls: dict[str, str]) -> Any:
    text = json.dumps(payload)
    for real, placeholder in urls.items():
        text = text.replace(real, placeholder)
    return json.loads(text)


def _version_argv(command: list[str]) -> list[str]:
    """``smg --version``; for ``python -m pkg.module`` the installed version of ``pkg``."""
    if command[1:2] == ["-m"]:
        dist = command[2].split(".")[0].replace("_", "-")
        return [command[0], "-c", f"import importlib.metadata as m; print({dist!r}, m.version({dist!r}))"]
    return [command[0], "--version"]


def record(command: list[str], name: str, workers: list[str], kill: tuple[int, str] | None, timeout_s: float) -> Path:
    """Start the gateway, record its payloads, stop it; the path of the written file."""
    version = subprocess.run(_version_argv(command), capture_output=True, text=True, timeout=30, check=False)
    port, metrics = _free_port(), _free_port()
    urls = list(workers)
    argv = [*command, "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(metrics), "--worker-urls", *urls, "--health-check-interval-secs", "1",
            "--health-failure-threshold", "1"]
    record: dict[str, Any] = {"_comment": f"recorded by scripts/gateway/record_fixtures.py: {shlex.join(command)}",
                              "version": (version.stdout or version.stderr).strip(), "worker_count": len(urls)}
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as gateway:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False) as client:
                _wait(client, lambda c: c.get("/workers").json().get("total", 0) == len(urls)
                      and c.get("/readiness").status_code == 200
                      and all(w["is_healthy"] for w in c.get("/workers").json()["workers"]),
                      timeout_s)
                for path in ("/workers", "/readiness", "/get_server_info"):
                    record[path] = _get(client, path)
                if kill is not None:
                    os.kill(kill[0], signal.SIGKILL)
                    _wait(client, lambda c: not any(w["is_healthy"] for w in c.get("/workers").json()["workers"]
                                                    if w["url"] == kill[1]), timeout_s)
                    record["dead"] = {path: _get(client, path) for path in ("/workers", "/readiness")}
        finally:
            gateway.terminate()
            try:
                gateway.wait(30)
            except subprocess.TimeoutExpired:
                gateway.kill()
    names = {u: f"http://WORKER{i}" for i, u in enumerate(urls)}
    names[f"127.0.0.1:{port}"] = "GATEWAY"
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / f"{name}.json"
    target.write_text(json.dumps(_anonymize(record, names), indent=1) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", required=True, help='the gateway command, e.g. "smg launch"')
    parser.add_argument("--name", required=True, help="file name under fixtures/gateway/ (no .json)")
    parser.add_argument("--worker-url", action="append", required=True, dest="workers")
    parser.add_argument("--kill", metavar="PID=URL", help="after recording, SIGKILL this worker and record again")
    parser.add_argument("--timeout", type=float, default=120.0)
    ns = parser.parse_args(argv)
    kill = None
    if ns.kill:
        pid, _, url = ns.kill.partition("=")
        kill = (int(pid), url)
    print(record(shlex.split(ns.gateway), ns.name, ns.workers, kill, ns.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
