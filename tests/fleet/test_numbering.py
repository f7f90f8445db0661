"""One numbering of a launched fleet's workers: the start-up display, the handles and the report agree.

The gateway lists its workers in its own order (by URL), so "worker 0" used to name one process in the
start-up lines and another in the gate table; and the fleet's ready time was the gateway's own.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.slow

SIM = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05"
TEST = """
def test_workers(sglang_server):
    for w in sglang_server.workers:
        print(f"HANDLE {w.index} {w.url}")
"""


def test_worker_numbers_and_start_time_are_the_fleets(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fleet=TEST)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-workers", "3", "--sglang-launch", SIM,
                                           "--sglang-report", "r.json", "-s", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == 0, out
    shown = {int(i): port for i, port in re.findall(r"worker (\d) \(:(\d+)\) SGLang ready", out)}
    handles = {int(i): url.rsplit(":", 1)[1] for i, url in re.findall(r"HANDLE (\d) (\S+)", out)}
    assert len(shown) == 3 and shown == handles, out
    report = json.loads((pytester.path / "r.json").read_text())
    assert {w["index"]: w["url"].rsplit(":", 1)[1] for w in report["fleet"]["workers"]} == shown
    # From the first worker's launch to the gateway's readiness, which the display reports too.
    gateway_ready = float(re.search(r"gateway ready at .*\(([\d.]+)s since the start\)", out).group(1))
    assert report["server"]["ready_s"] >= gateway_ready - 0.1
    assert [p["name"] for p in report["server"]["phases"]] == ["starting workers", "starting gateway"]
