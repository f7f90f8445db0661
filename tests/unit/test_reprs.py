"""What users print is one short line with the key figures, and never a secret."""

from __future__ import annotations

from pytest_sglang.fleet.discovery import WorkerEntry
from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.plugin.results import GateResults
from pytest_sglang.server import SGLangServer

MAX_REPR = 240


def _short(text: str) -> str:
    assert "\n" not in text and len(text) <= MAX_REPR, f"{len(text)} characters: {text}"
    return text


def _result() -> LoadResult:
    spec = LoadSpec(requests=32, concurrency=8, input_len=256, output_len=32)
    return LoadResult(spec=spec, url="http://127.0.0.1:30000", duration=1.25, completed=31, failed=1,
                      output_throughput=2968.31, median_ttft_ms=12.06, p99_ttft_ms=22.25, p99_itl_ms=8.15,
                      errors={"http": 1})


def test_a_load_result_shows_its_shape_and_key_figures() -> None:
    text = _short(repr(_result()))
    assert text == ("<LoadResult 32 requests c=8 256+32 tok: completed=31 failed=1 output=2,968.3 tok/s "
                    "ttft_p50=12.1 ms ttft_p99=22.2 ms itl_p99=8.2 ms in 1.25 s>")


def test_gate_outcomes_and_results_say_the_verdicts() -> None:
    ok = GateOutcome("capacity", [compare("capacity", "max_total_num_tokens", 61_472, ">=", 1000)])
    bad = GateOutcome("throughput", [compare("throughput", "output_throughput", 900.0, ">=", 930, unit="tok/s"),
                                     compare("throughput", "error_rate", 0, "<=", 0)])
    assert _short(repr(ok)) == "<GateOutcome capacity: 1/1 checks ok, passed>"
    assert _short(repr(bad)).startswith("<GateOutcome throughput: 1/2 checks ok, FAILED output_throughput 900")
    results = GateResults(outcomes=[ok, bad], loads=[_result()] * 5)
    text = _short(repr(results))
    assert text.startswith("<GateResults outcomes: capacity ok, throughput FAILED; loads: 31 ok at 2,968.3 tok/s")
    assert text.endswith("(last 3 of 5)>")


def test_server_and_fleet_handles_show_where_and_what_never_secrets() -> None:
    gateway = SGLangServer("http://user:hunter2@127.0.0.1:30000", "attach", api_key="sk-topsecret")
    workers = [WorkerHandle(i, WorkerEntry(url=f"http://u:pw{i}@10.0.0.{i}:30000", role="regular",
                                           is_healthy=i != 1)) for i in range(3)]
    fleet = SGLangFleet(gateway=gateway, flavor="smg", workers=workers, version="1.13.0")
    for text in (repr(gateway), repr(fleet), repr(workers[0]), repr(workers[1])):
        _short(text)
        for secret in ("hunter2", "sk-topsecret", "pw0", "pw1"):
            assert secret not in text
    assert repr(fleet) == ("<SGLangFleet http://user:***@127.0.0.1:30000 mode=attach gateway=smg 1.13.0 workers=3 "
                           "healthy=2/3>")
    assert repr(workers[1]) == "<WorkerHandle 1 regular http://***@10.0.0.1:30000 unhealthy, via gateway only>"
