"""The failover line of every report: a worker killed, or the gateway restarted (no detection figure)."""

from __future__ import annotations

from pytest_sglang.report.fleet import failover_head

ERRORS = {"errors": {"refused": 88, "http_404": 25}, "error_rate": 0.5}


def test_a_killed_worker_names_the_worker_and_its_detection() -> None:
    line = failover_head({"worker": 1, "signal": "SIGKILL", **ERRORS, "detect_s": 0.15, "recover_s": 4.38})
    assert line == ("worker 1 SIGKILL: 113 errors (50.0%) [refused=88, http_404=25], detected in 0.15 s, serving "
                    "again 4.38 s after the restart")


def test_a_restarted_gateway_is_named_and_not_detected() -> None:
    line = failover_head({"target": "gateway", "signal": "SIGKILL", **ERRORS, "recover_s": 0.93})
    assert line == ("gateway SIGKILL: 113 errors (50.0%) [refused=88, http_404=25], serving again 0.93 s after the "
                    "restart")
