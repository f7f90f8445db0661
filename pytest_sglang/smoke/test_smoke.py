"""The smoke checks: is it up, which server is it, what does it hold, does it serve a load, are answers well formed.

Each floor comes from the server's own figures (``/server_info``, a one-at-a-time load measured here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, native_checks, openai_checks
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.gates.facts.capacity import evaluate_capacity, served_max_model_len
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.smoke.plan import SINGLE_STREAM_SHARE, smoke_shape

if TYPE_CHECKING:
    from pytest_sglang.plugin.load_runner import LoadRunner
    from pytest_sglang.plugin.results import GateResults
    from pytest_sglang.server.members import Handle

GATE = "smoke"


def test_ready(sglang_server: Handle, sglang_server_info: dict[str, Any], sglang_gate: GateResults) -> None:
    """/health answers 200 and /server_info parses (validated against SGLang's schema by the plugin)."""
    sglang_gate.record(GateOutcome(GATE, [
        compare(GATE, "health_status", sglang_server.health(), "==", 200, source="GET /health"),
        compare(GATE, "server_info_fields", len(sglang_server_info), ">=", 1, source="GET /server_info"),
    ]))


def test_identity(sglang_server_info: dict[str, Any], sglang_acceptance: CheckContext,
                  sglang_gate: GateResults) -> None:
    """/v1/models lists the model /server_info serves, and the server names its SGLang version."""
    report = run(openai_checks.check_models, sglang_acceptance)
    version = sglang_server_info.get("version")
    outcome = GateOutcome(GATE, [compare(GATE, "version_reported", isinstance(version, str) and bool(version), "==",
                                         True, source="GET /server_info version")])
    outcome.context.update({"model": sglang_acceptance.features.model, "version": str(version),
                            "models listed": str(report.figures.get("models"))})
    sglang_gate.record(outcome)


def test_capacity(sglang_server: Handle, sglang_server_info: dict[str, Any], sglang_gate: GateResults) -> None:
    """The server runs requests, accepts a smoke request's length and holds the smoke load at once.

    The figures are recorded: the next run's ``--sglang-baseline`` flags a smaller KV pool.
    """
    shape = smoke_shape(sglang_server_info)
    sglang_gate.record(evaluate_capacity(
        sglang_server_info, min_running_requests=1, min_context_length=shape.request_tokens,
        min_concurrent_requests=shape.concurrency, avg_request_tokens=shape.request_tokens,
        max_model_len=served_max_model_len(sglang_server)))


def test_load(sglang_server_info: dict[str, Any], sglang_load: LoadRunner, sglang_gate: GateResults) -> None:
    """One short load: no request fails, and batching delivers at least half of one-at-a-time throughput.

    The floor is measured in this test (one request at a time, then ``concurrency`` at once), so it
    fits the server under test, whatever its hardware.
    """
    shape = smoke_shape(sglang_server_info)
    alone = sglang_load(requests=4, concurrency=1, input_len=shape.input_len, output_len=shape.output_len)
    sglang_gate.record(evaluate_throughput(alone, max_error_rate=0.0))
    if not alone.completed:
        pytest.fail("the smoke load: no request of the one-at-a-time run completed", pytrace=False)
    floor = round(SINGLE_STREAM_SHARE * alone.output_throughput, 1)
    together = sglang_load(requests=shape.requests, concurrency=shape.concurrency, input_len=shape.input_len,
                           output_len=shape.output_len)
    outcome = evaluate_throughput(together, min_output_tok_s=floor, max_error_rate=0.0)
    outcome.context["floor"] = (f"{SINGLE_STREAM_SHARE:g} x {alone.output_throughput:,.1f} tok/s measured one "
                                "request at a time")
    sglang_gate.record(outcome)


@pytest.mark.parametrize("stream", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize("route", ["chat", "completions"])
def test_api_shape(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """OpenAI answers carry the fields clients read; finish_reason is set; a stream ends with [DONE]."""
    run(openai_checks.check_shape, sglang_acceptance, route, stream)


def test_native_generate(sglang_acceptance: CheckContext) -> None:
    """SGLang's own /generate answers with text and meta_info."""
    run(native_checks.check_native, sglang_acceptance, False)
