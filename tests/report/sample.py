"""Synthetic but realistic records (the shapes the plugin, gates and load generator produce)."""

from __future__ import annotations

import json
import random
from typing import Any

from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.report.identity import Phase, ServerIdentity
from pytest_sglang.report.records import TestRecord


def load(
    concurrency: int,
    throughput: float,
    *,
    failed: int = 0,
    requests: int = 32,
    seed: int = 0,
    records: bool = True,
) -> dict[str, Any]:
    rng = random.Random(seed)
    recs = []
    for i in range(requests):
        ttft = 0.02 + rng.random() * 0.01 * concurrency
        itl = [0.004 + rng.random() * 0.002 for _ in range(15)]
        recs.append(
            {
                "index": i,
                "start": i * 0.01,
                "ttft": ttft,
                "itl": itl,
                "e2e": ttft + sum(itl),
                "output_len": 16,
                "prompt_len": 64,
                "expected_output_len": 16,
                "chunks": 16,
                "error": None,
                "error_kind": None,
            }
        )
    ttfts = sorted(r["ttft"] * 1000 for r in recs)
    data: dict[str, Any] = {
        "backend": "sglang",
        "dataset_name": "random-ids",
        "request_rate": None,
        "max_concurrency": concurrency,
        "random_input_len": 64,
        "random_output_len": 16,
        "completed": requests - failed,
        "failed": failed,
        "duration": 2.0,
        "total_input_tokens": 64 * requests,
        "total_output_tokens": 16 * requests,
        "request_throughput": throughput / 16,
        "input_throughput": throughput * 4,
        "output_throughput": throughput,
        "total_throughput": throughput * 5,
        "median_ttft_ms": ttfts[len(ttfts) // 2],
        "p99_ttft_ms": ttfts[-1],
        "mean_ttft_ms": sum(ttfts) / len(ttfts),
        "median_itl_ms": 5.0,
        "p99_itl_ms": 6.0,
        "median_e2e_latency_ms": 100.0,
        "p99_e2e_latency_ms": 140.0,
        "concurrency": concurrency * 0.9,
        "errors": {"http_503": failed} if failed else {},
        "spec": {
            "requests": requests,
            "concurrency": concurrency,
            "request_rate": None,
            "input_len": 64,
            "output_len": 16,
            "api": "native",
            "dataset": "random-ids",
        },
    }
    if records:
        data["records"] = recs
    return data


def throughput_outcome(measured: float, floor: float) -> GateOutcome:
    return GateOutcome(
        "throughput",
        [
            compare(
                "throughput",
                "output_throughput",
                measured,
                ">=",
                floor,
                unit="tok/s",
                source="load run",
                remedy="raise --max-running-requests",
            )
        ],
        context={"load": "concurrency=8 requests=32"},
    )


def capacity_outcome(tokens: int = 4096, floor: int = 2000) -> GateOutcome:
    return GateOutcome(
        "capacity",
        [
            compare(
                "capacity", "max_total_num_tokens", tokens, ">=", floor, unit="tok", source="server_info"
            ),
            compare("capacity", "max_running_requests", 48, ">=", 16, unit="req", source="server_info"),
        ],
    )


def hicache_outcome() -> GateOutcome:
    return GateOutcome(
        "hicache",
        [
            compare("hicache", "enable_hierarchical_cache", True, "==", True, source="server_info"),
            compare(
                "hicache",
                "host_pool_tokens",
                8192,
                ">=",
                12000,
                unit="tok",
                source="log",
                remedy="raise --hicache-ratio",
            ),
        ],
    )


def props(outcomes: list[GateOutcome], loads: list[dict[str, Any]]) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [("sglang_outcome", json.dumps(o.to_dict())) for o in outcomes]
    out += [(f"sglang.{c.gate}.{c.metric}", c.measured) for o in outcomes for c in o.checks]
    out += [("sglang_load", json.dumps(ld)) for ld in loads]
    return out


def identity(**over: Any) -> ServerIdentity:
    base = ServerIdentity(
        sglang_version="0.5.23",
        model="meta-llama/Llama-3.1-8B-Instruct",
        runner="simulator",
        url="http://127.0.0.1:40001",
        launch_args=[
            "--model-path",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--tp",
            "2",
            "--port",
            "40001",
            "--api-key",
            "***",
        ],
        tp_size=2,
        dp_size=1,
        pp_size=1,
        device="cuda",
        gpu_model="H100 80GB (simulated)",
        gpu_count=2,
        host={"hostname": "ci-1", "cpus": 2, "memory_gb": 24.0},
        ready_s=31.5,
        max_total_num_tokens=4096,
        phases=[
            Phase("process start", 0.0, 1.2),
            Phase("load weights", 1.2, 18.0),
            Phase("kv cache allocation", 18.0, 19.5),
            Phase("cuda graph capture", 19.5, 27.0),
            Phase("http server up", 27.0, 28.0),
            Phase("warmup", 28.0, 31.5),
        ],
    )
    for k, v in over.items():
        setattr(base, k, v)
    return base


def tests() -> list[TestRecord]:
    cap = TestRecord("tests/test_gate.py::test_capacity", gates=[capacity_outcome()])
    hic = TestRecord("tests/test_gate.py::test_hicache", outcome="failed", gates=[hicache_outcome()])
    thr = TestRecord(
        "tests/test_gate.py::test_throughput",
        gates=[throughput_outcome(900.0, 500.0)],
        loads=[load(8, 900.0, seed=1)],
    )
    slo = TestRecord(
        "tests/test_gate.py::test_slo_curve",
        gates=[
            GateOutcome(
                "slo",
                [compare("slo", "max_concurrency_within_slo", 16, ">=", 8, unit="req", source="load run")],
            )
        ],
        loads=[load(c, 300.0 * c**0.7, seed=c) for c in (1, 2, 4, 8, 16, 32)],
    )
    return [cap, hic, thr, slo]
