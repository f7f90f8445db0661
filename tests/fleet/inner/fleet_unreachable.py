"""Inner test: a gateway whose workers this machine cannot reach (a cluster's pod IPs, seen from CI)."""

import pytest

from pytest_sglang.errors import ServerUnavailable


def test_workers_are_judged_by_the_gateway(sglang_fleet):
    assert len(sglang_fleet.workers) == 3
    for worker in sglang_fleet.workers:
        assert not worker.reachable
        assert worker.unreachable.startswith("not reachable from here")
        assert worker.entry.is_healthy and worker.entry.fact("tp_size") == "1"
    with pytest.raises(ServerUnavailable, match="no worker is reachable from here"):
        sglang_fleet.info()
