"""The marker gates: one row per marker, resolved lazily so that importing the plugin stays cheap.

Each gate module exposes ``run_marker(ctx: GateContext, **kwargs) -> GateOutcome`` whose keyword-only
parameters ARE the marker's keywords: the plugin validates marker kwargs at collection by binding
them to that signature (a typo is a usage error naming the marker) and evaluates the marker by
calling it. ``assert_*`` helpers build the same outcome, so both give the same message.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_sglang.gates.base import GateOutcome


@dataclass(frozen=True)
class MarkerGate:
    marker: str
    target: str  # "module:function"
    doc: str  # the --markers line: signature and one sentence

    def load(self) -> Callable[..., GateOutcome]:
        module, _, name = self.target.partition(":")
        fn: Callable[..., GateOutcome] = getattr(importlib.import_module(module), name)
        return fn


DOCS_URL = "https://github.com/pytest-sglang/pytest-sglang#markers"

GATES: tuple[MarkerGate, ...] = (
    MarkerGate(
        "sglang_capacity", "pytest_sglang.gates.capacity:run_marker",
        "sglang_capacity(*, min_total_tokens=None, min_running_requests=None, min_context_length=None, "
        "min_concurrent_requests=None, avg_request_tokens=None, verify_live=False): fail unless the server's "
        "KV capacity meets these floors (per DP rank).",
    ),
    MarkerGate(
        "sglang_hicache", "pytest_sglang.gates.hicache:run_marker",
        "sglang_hicache(*, enabled=True, min_host_tokens=None, min_host_gb_per_rank=None, min_ratio=None, "
        "write_policy=None, io_backend=None, mem_layout=None, storage_backend=None, effective=False, "
        "min_gain=None): fail unless the hierarchical cache is configured (and, with effective=True, works).",
    ),
    MarkerGate(
        "sglang_throughput", "pytest_sglang.gates.throughput:run_marker",
        "sglang_throughput(*, min_output_tok_s=None, min_request_s=None, max_ttft_ms_median=None, "
        "max_ttft_ms_p99=None, max_itl_ms_p99=None, max_tpot_ms_median=None, max_e2e_ms_p99=None, "
        "max_error_rate=0, concurrency=None, request_rate=None, requests=128, input_len=1024, output_len=256, "
        "api='native', repeats=1): run a load and fail unless it meets these floors and ceilings.",
    ),
    MarkerGate(
        "sglang_slo", "pytest_sglang.gates.slo:run_marker",
        "sglang_slo(*, max_ttft_ms_p99=None, max_itl_ms_p99=None, max_tpot_ms_median=None, max_e2e_ms_p99=None, "
        "min_concurrency, input_len=512, output_len=128, api='native', max_concurrency=512, max_requests=2000, "
        "time_budget_s=300): find the highest concurrency at which the SLO holds and fail if it is below "
        "min_concurrency.",
    ),
)

GATES_BY_MARKER = {g.marker: g for g in GATES}


@dataclass
class GateContext:
    """What a marker gate may use. Built by the plugin for each marked test.

    ``load(spec)`` runs a :class:`pytest_sglang.loadgen.LoadSpec` against ``server`` holding the
    run-wide load lock (load tests never overlap, also under xdist) and records the result for the
    reports. ``factory`` is the session's ``sglang_server_factory`` (A/B launches) or None.
    """

    server: Any  # pytest_sglang.server.SGLangServer
    load: Callable[..., Any]
    factory: Any = None
    nodeid: str = ""
