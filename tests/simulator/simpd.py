"""Helpers of the prefill-decode simulator tests: a pair of simulators, a gateway in PD mode, metrics.

The gateways are the real ones: smg 1.13 from this venv, sglang-router 0.3.2 from the interpreter
named by ``SGLANG_ROUTER_PYTHON`` (``scripts/gateway/setup.sh``), each a subprocess in its own session,
stopped (process group) on exit.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_sglang.sglang import metrics_text
from pytest_sglang.simulator import Simulator, free_port
from tests.conftest import SimFactory
from tests.gates.fleetkit import gateway_ready, stop_group

#: The same "weights" on every launch: a greedy answer depends on the prompt and --random-seed only.
SEED = ("--random-seed", "7", "--enable-metrics")
MODEL = "sim/tiny-llama"
ROUTER_ENV = "SGLANG_ROUTER_PYTHON"
ROUTER_DEFAULT = Path("/tmp/gw/venv-router/bin/python")


@dataclass
class Pair:
    prefill: Simulator
    decode: Simulator
    bootstrap_port: int

    def body(self, body: Mapping[str, Any], room: int | None = None) -> dict[str, Any]:
        """``body`` with the fields a PD gateway adds."""
        room = random.getrandbits(63) if room is None else room
        return {**body, "bootstrap_host": "127.0.0.1", "bootstrap_port": self.bootstrap_port, "bootstrap_room": room}

    def send(self, path: str, body: Mapping[str, Any], timeout: float = 30.0) -> tuple[httpx.Response, httpx.Response]:
        """Send the same request to both workers at once, as the gateway does: (prefill, decode) responses."""
        full = self.body(body)
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(httpx.post, f"{w.url}{path}", json=full, timeout=timeout)
                       for w in (self.prefill, self.decode)]
            prefill, decode = (f.result() for f in futures)
        return prefill, decode


def pair(
    sim_factory: SimFactory,
    *,
    prefill: Sequence[str] = (),
    decode: Sequence[str] = (),
    prefill_env: Mapping[str, str] | None = None,
    decode_env: Mapping[str, str] | None = None,
) -> Pair:
    """A prefill and a decode simulator (same --random-seed), the prefill on a free bootstrap port."""
    port = free_port()
    p = sim_factory(*SEED, "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(port),
                    *prefill, env=prefill_env)
    d = sim_factory(*SEED, "--disaggregation-mode", "decode", *decode, env=decode_env)
    return Pair(p, d, port)


def metric(url: str, name: str, **labels: str) -> float | None:
    """One value of a worker's ``/metrics`` (summed over label sets matching ``labels``), None if absent."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return metrics_text.value(metrics_text.parse(text), name, **labels)


def generate(url: str, text: str = "The capital city of France is", **extra: Any) -> dict[str, Any]:
    body = {"text": text, "sampling_params": {"max_new_tokens": 8, "temperature": 0}, "return_logprob": True,
            "logprob_start_len": 0, "top_logprobs_num": 2, **extra}
    r = httpx.post(f"{url}/generate", json=body, timeout=30)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def smg_command() -> list[str]:
    return [str(Path(sys.executable).parent / "smg"), "launch"]


def router_command() -> list[str]:
    python = Path(os.environ.get(ROUTER_ENV) or ROUTER_DEFAULT)
    if not python.is_file():
        pytest.skip(f"sglang-router 0.3.2 not found at {python}: run `bash scripts/gateway/setup.sh` and export "
                    f"the {ROUTER_ENV}=... line it prints (scripts/test.sh does both)")
    return [str(python), "-m", "sglang_router.launch_router"]


@contextlib.contextmanager
def pd_gateway(command: Sequence[str], prefill: Sequence[tuple[str, int]], decode: Sequence[str], log: Path,
               *extra: str, timeout_s: float = 60.0) -> Iterator[str]:
    """A gateway in PD mode (``--prefill URL BOOTSTRAP_PORT``, ``--decode URL``); yields its URL once ready."""
    port, metrics = free_port(), free_port()
    argv = [*command, "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(metrics), "--pd-disaggregation", *extra]
    for url, boot in prefill:
        argv += ["--prefill", url, str(boot)]
    for url in decode:
        argv += ["--decode", url]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while not gateway_ready(url, len(prefill) + len(decode)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gateway not ready (exit {proc.poll()}): {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield url
    finally:
        stop_group(proc)
