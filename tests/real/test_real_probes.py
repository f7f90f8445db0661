"""``sglang_probes`` against real SGLang 0.5.23 (attached): its ``/health`` runs a one-token generation.

0.5.23's health handler submits the generation and sleeps 1 s before it first looks for the answer, so
no ``/health`` answers within 1 s: Kubernetes' default ``timeoutSeconds: 1`` counts every probe as failed,
even on an idle server (sglang#22511). A probe timeout above that answer holds during the same load.
"""

from __future__ import annotations

import pytest
from realsgl import RawServer

pytestmark = pytest.mark.real_sglang

# The chat API: the tiny model's 401-token vocabulary is below the random-ids range (0.5.23's scheduler dies
# on an input id beyond the vocabulary), while its tokenizer only makes ids it knows.
LOAD = 'requests=12, concurrency=2, input_len=256, output_len=8, api="chat", request_timeout_s=120'
INNER = """
import pytest


@pytest.mark.sglang_probes(readiness_timeout_seconds={timeout}, readiness_period_seconds=1,
                           readiness_failure_threshold=2, liveness_path=None, {load})
def test_pod_survives():
    pass
"""


def _run(pytester: pytest.Pytester, raw_server: RawServer, monkeypatch: pytest.MonkeyPatch,
         timeout: float) -> pytest.RunResult:
    assert raw_server.api_key is not None
    pytester.makepyfile(test_probes=INNER.format(timeout=timeout, load=LOAD))
    monkeypatch.setenv("SGLANG_API_KEY", raw_server.api_key)
    # A load on a server the run did not start needs the owner's consent.
    return pytester.runpytest_subprocess("--sglang-url", raw_server.url, "--sglang-allow-disruptive",
                                         "-p", "no:cacheprovider", "-rfE")


def test_probes_with_a_timeout_above_the_health_generation_hold(
    pytester: pytest.Pytester, raw_server: RawServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run(pytester, raw_server, monkeypatch, timeout=30).assert_outcomes(passed=1)


def test_kubernetes_default_probe_timeout_fails_on_real_health(
    pytester: pytest.Pytester, raw_server: RawServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = _run(pytester, raw_server, monkeypatch, timeout=1)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "  readiness probe GET /health (timeoutSeconds 1, periodSeconds 1, failureThreshold 2): measured failed "
        "2 times in a row*latencies * s (200), * s (200)*marked the pod unready*: FAILED",
    ])
    result.stdout.fnmatch_lines(["Fix: timeoutSeconds: * would have held (the slowest answer took * s); or start "
                                 "SGLang with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false in its environment*"])
    assert raw_server.api_key not in result.stdout.str() + result.stderr.str()
