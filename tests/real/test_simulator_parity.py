"""The simulator against real SGLang 0.5.23 with the same launch args: real is the referee.

Critical differences (status codes, media types, empty bodies, SSE framing, value types, key
/server_info values) fail the test; fidelity gaps (keys or metric families one side lacks) are
listed in the captured output (``-rA``) and in ``parity.txt`` for the simulator's owner.

The endpoints SGLang's gateways call on a worker are held to more: there a key or metric family
only one side has is a failure too, since the gateway parses them (``GATEWAY_PROBES``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from realsgl import RawServer, RealSetup

pytestmark = pytest.mark.real_sglang
COMPARE = Path(__file__).resolve().parents[2] / "scripts" / "real-sglang" / "compare_simulator.py"
#: The tiny profile at a short time scale; every SGLang flag is the real launch's.
SIM_FLAGS = ("--sim-profile", "tiny", "--sim-time-scale", "0.05")


def _compare_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare_simulator", COMPARE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("compare_simulator", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: What smg 1.13.0 and sglang-router 0.3.2 ask of a worker, beyond the probes of compare_simulator.py
#: (observed through a logging proxy, fixtures/gateway/README.md): registration GET /health,
#: /server_info, /model_info, /v1/models (smg), then smg's load poll (GET /loads?model=M, 404, then
#: /v1/loads?include=core,disagg,queues,memory every 10 s), router 0.3.2's GET /get_load (404 on
#: 0.5.23), /metrics for the gateways' /engine_metrics, POST /flush_cache without a body, and the
#: generation bodies the gateways forward (they add fields such as "model", "background").
SMG_GENERATE = {"text": "The capital", "model": "unknown", "sampling_params": {"max_new_tokens": 3},
                "return_text_in_logprobs": False, "stream": False, "log_metrics": True, "background": False,
                "no_logs": False, "return_bytes": False, "return_entropy": False}
ROUTER_CHAT = {"messages": [{"role": "user", "content": "hi"}], "model": "default", "logprobs": False,
               "max_completion_tokens": 3, "stream": False, "no_stop_trim": False, "ignore_eos": False,
               "continue_final_message": False, "skip_special_tokens": True, "separate_reasoning": True,
               "stream_reasoning": True, "return_hidden_states": False}
ROUTER_COMPLETION = {"model": "default", "prompt": "hi", "max_tokens": 3, "stream": False, "echo": False,
                     "no_stop_trim": False, "ignore_eos": False, "skip_special_tokens": True,
                     "return_hidden_states": False}
#: (method, path, kind, body, strict): strict = every key and metric family must match too.
GATEWAY_PROBES: tuple[tuple[str, str, str, dict[str, object] | None, bool], ...] = (
    ("POST", "/generate", "json", SMG_GENERATE, False),  # also gives both a decode history for /v1/loads
    ("POST", "/generate", "sse", {**SMG_GENERATE, "stream": True, "model": None}, False),
    ("POST", "/v1/chat/completions", "json", ROUTER_CHAT, False),
    ("POST", "/v1/chat/completions", "sse", {**ROUTER_CHAT, "stream": True}, False),
    ("POST", "/v1/completions", "json", ROUTER_COMPLETION, False),
    ("GET", "/get_load", "json", None, True),
    ("GET", "/loads?model=default", "json", None, True),
    ("GET", "/v1/loads", "json", None, True),
    ("GET", "/v1/loads?include=core,disagg,queues,memory", "json", None, True),
    ("GET", "/v1/loads?include=core", "json", None, True),
    ("GET", "/v1/loads?include=core,bogus", "any", None, True),
    ("GET", "/v1/loads?dp_rank=0", "json", None, True),
    ("GET", "/v1/loads?dp_rank=7", "json", None, True),
    ("GET", "/v1/loads?dp_rank=abc", "json", None, True),
    ("GET", "/v1/loads?format=prometheus", "metrics", None, True),
    ("POST", "/v1/loads", "json", None, True),
    ("GET", "/flush_cache", "any", None, True),
    ("POST", "/flush_cache", "any", None, True),
    ("PUT", "/flush_cache", "json", None, True),
    ("GET", "/get_model_info", "json", None, True),
    ("GET", "/health_generate", "empty", None, True),
    ("POST", "/health", "json", None, True),
    ("GET", "/ping", "empty", None, True),
)


@pytest.fixture(scope="module")
def simulator(raw_server: RawServer, real_setup: RealSetup, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from pytest_sglang.simulator import Simulator

    assert raw_server.api_key is not None
    log = tmp_path_factory.mktemp("parity") / "simulator.log"
    sim = Simulator([*real_setup.args(), "--api-key", raw_server.api_key, *SIM_FLAGS], log_path=log)
    sim.start()
    yield sim
    sim.stop()


def test_simulator_http_agrees_with_real(raw_server: RawServer, simulator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert raw_server.api_key is not None
    diffs = _compare_module().compare(raw_server.url, simulator.url, raw_server.api_key)
    listing = "\n".join(str(d) for d in diffs).replace(raw_server.api_key, "***")
    (tmp_path / "parity.txt").write_text(listing + "\n")
    print(listing)
    critical = [str(d) for d in diffs if d.critical]
    assert not critical, "simulator disagrees with real SGLang 0.5.23 (the referee):\n" + "\n".join(critical)


def test_simulator_startup_log_reads_like_real(raw_server: RawServer, simulator) -> None:  # type: ignore[no-untyped-def]
    from pytest_sglang.server.phases import LogFollower

    real = LogFollower(raw_server.log_path).stop()
    sim = LogFollower(simulator.log_path).stop()
    real_phases, sim_phases = [p.name for p in real.phases], [p.name for p in sim.phases]
    print(f"phases real {real_phases}\nphases sim  {sim_phases}")
    print(f"scheduler line real {sorted(real.scheduler_info)}\nscheduler line sim  {sorted(sim.scheduler_info)}")
    assert (real.kv_tokens, real.max_total_num_tokens) == (4096, 4096)
    assert (sim.kv_tokens, sim.max_total_num_tokens) == (4096, 4096)
    assert real.fatal == sim.fatal == []
    # every phase real SGLang goes through appears in the simulator's log, in the same order
    remaining = iter(sim_phases)
    assert all(name in remaining for name in real_phases), (real_phases, sim_phases)


def test_simulator_answers_the_gateways_like_real(raw_server: RawServer, simulator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    compare = _compare_module()
    assert raw_server.api_key is not None
    headers = {"Authorization": f"Bearer {raw_server.api_key}"}
    failures: list[str] = []
    seen: list[str] = []
    with compare.client(raw_server.url) as real, compare.client(simulator.url) as sim:
        for method, path, kind, body, strict in GATEWAY_PROBES:
            probe = compare.Probe(method, path, kind, body, label="gateway")
            kwargs: dict[str, object] = {"headers": headers} if body is None else {"headers": headers, "json": body}
            pair = [c.request(method, path, **kwargs) for c in (real, sim)]  # type: ignore[arg-type]
            diffs = list(compare.compare_probe(probe, *pair))
            if kind == "any" and pair[0].content != pair[1].content:  # plain-text bodies: the exact bytes
                diffs.append(compare.Diff(probe.name, "body", repr(pair[0].content[:80]), repr(pair[1].content[:80])))
            seen += [str(d) for d in diffs]
            failures += [str(d) for d in diffs if d.critical or strict]
    listing = "\n".join(seen).replace(raw_server.api_key, "***")
    (tmp_path / "gateway-parity.txt").write_text(listing + "\n")
    print(listing)
    assert not failures, ("the simulator answers a gateway's calls unlike real SGLang 0.5.23 (the referee):\n"
                          + "\n".join(failures).replace(raw_server.api_key, "***"))


def test_a_text_model_takes_images_like_real(raw_server: RawServer, simulator) -> None:  # type: ignore[no-untyped-def]
    """On a text-only model: /model_info, a chat image part and native image_data, as real 0.5.23 answers them."""
    import httpx

    from pytest_sglang import images

    assert raw_server.api_key is not None
    headers = {"Authorization": f"Bearer {raw_server.api_key}"}
    url = images.data_url(images.solid_image("red", 64, 48), "png")
    chat = {"model": "default", "max_tokens": 3, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What colour is it?"}]}]}
    native = {"text": "What colour is it?", "image_data": url, "sampling_params": {"max_new_tokens": 3}}
    answers = []
    for base in (raw_server.url, simulator.url):
        with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
            info = c.get("/model_info").json()
            r_chat, r_native = c.post("/v1/chat/completions", json=chat), c.post("/generate", json=native)
        message = r_chat.json().get("message") if r_chat.status_code != 200 else None
        answers.append((info.get("has_image_understanding"), r_chat.status_code, message, r_native.status_code))
    print(f"real {answers[0]}\nsim  {answers[1]}")
    assert answers[0] == answers[1]
