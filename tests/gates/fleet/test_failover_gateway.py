"""``@pytest.mark.sglang_failover(target="gateway")``: the launched gateway restarted under load, in pytest sessions.

Simulator workers behind smg 1.13. The healthy twin: smg comes back on its ports with ``--worker-urls``, lists
and routes both workers again. The fault (smg#752, smg#1419: a gateway that comes up empty after a container
restart) is a gateway command that forgets its workers when it starts a second time, as a gateway whose workers
were registered at run time (``POST /workers``) and not persisted does: the gate fails naming the workers lost.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gates.fleetkit import SIM_LAUNCH, SMG
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.fleet import failover
from pytest_sglang.gates.keywords import marker_problem

FAST_CHECKS = "--health-check-interval-secs 1 --health-failure-threshold 1 --policy round_robin"
INNER = """
import pytest


@pytest.mark.sglang_failover(target="gateway", requests=200, concurrency=8, input_len=32, output_len=32,
                             max_error_rate=1, max_recover_s=30)
def test_gateway_restart(sglang_gate):
    record = sglang_gate["failover"].context["failover"]
    assert record["target"] == "gateway" and record["restarted_after"] >= 60  # at=0.3 of 200 requests
    assert len(record["workers_before"]) == 2


def test_the_gateway_answers_after(sglang_fleet):  # 404 when it came back empty: "No worker available"
    with sglang_fleet.client() as client:
        assert client.post("/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 1}}).status_code \\
            in (200, 404)
"""
#: A gateway command that drops --worker-urls from its second start on (the state a restart loses).
FORGETFUL = """
import os, sys
argv, marker = sys.argv[1:], sys.argv[0] + ".started"
if os.path.exists(marker) and "--worker-urls" in argv:
    i = argv.index("--worker-urls")
    j = i + 1
    while j < len(argv) and not argv[j].startswith("--"):
        j += 1
    argv = argv[:i] + argv[j:]
open(marker, "w").close()
os.execv({smg!r}, [{smg!r}, "launch", *argv])
"""


def _run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH, "--sglang-gateway", FAST_CHECKS,
        "-p", "no:cacheprovider", "-rfE", *extra)


def test_a_gateway_that_comes_back_with_its_workers_passes(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*failover*workers_after_restart*2 workers*>= 2 workers*ok*",
                                 "*gateway SIGKILL: * errors (*)*"])


def test_a_gateway_that_comes_back_empty_is_caught(pytester: pytest.Pytester, tmp_path: Path) -> None:
    script = tmp_path / "forgetful_gateway.py"
    script.write_text(FORGETFUL.format(smg=SMG[0]))
    result = _run(pytester, "--sglang-gateway-command", f"{sys.executable} {script}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "sglang failover gate failed: workers_after_restart 0 workers (required >= 2)*",
        "*the restarted gateway did not list every worker again (smg#752, smg#1419: a gateway that comes up empty)*",
    ])


@dataclass
class Ctx:
    server: object = None
    load: object = None
    request_timeout_s: float | None = None
    load_timeout_s: float | None = None


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"worker": 1}, "@pytest.mark.sglang_failover(target='gateway', worker=1): target='gateway' restarts the "
                    "gateway: no worker is killed, detected or restarted. Fix: drop worker, or target='gateway'"),
    ({"restart": False}, "@pytest.mark.sglang_failover(target='gateway', restart=False): *Fix: drop restart, *"),
    ({"max_detect_s": 5.0}, "@pytest.mark.sglang_failover(target='gateway', max_detect_s=5.0): *"),
    ({"cancel_rate": 0.2}, "@pytest.mark.sglang_failover(target='gateway', cancel_rate=0.2): *drain*"),
    ({"max_drain_s": 5.0}, "@pytest.mark.sglang_failover(target='gateway', max_drain_s=5.0): *drain*"),
])
def test_worker_keywords_with_the_gateway_target_are_usage_errors(kwargs: dict[str, object], expected: str) -> None:
    from fnmatch import fnmatchcase

    with pytest.raises(ConfigError) as exc:
        failover.run_marker(Ctx(), target="gateway", **kwargs)  # type: ignore[arg-type]
    assert fnmatchcase(str(exc.value), expected), str(exc.value)


def test_an_unknown_target_is_refused_at_collection() -> None:
    problem = marker_problem("sglang_failover", failover.run_marker, (), {"target": "router"})
    assert problem is not None and problem.startswith(
        "@pytest.mark.sglang_failover(target='router'): must be one of worker, gateway"), problem
