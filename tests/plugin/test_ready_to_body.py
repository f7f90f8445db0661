"""Between a server's first /health 200 and the first test body: one /server_info read, no load generator.

That span is the readiness lag users wait on (``benchmarks/bench_readiness.py --plugin`` measures it);
each extra request or heavy import in it showed there (issue 34 item 2).
"""

from __future__ import annotations

import pytest

from pytest_sglang.simulator import Simulator

SIM_ARGS = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --enable-metrics"


@pytest.fixture(scope="module")
def sim() -> Simulator:
    with Simulator(SIM_ARGS.split(), wait="healthy") as running:
        yield running


def test_attach_reads_server_info_once_and_imports_no_load_generator(pytester: pytest.Pytester,
                                                                    sim: Simulator) -> None:
    pytester.copy_example("test_ready_to_body.py")
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SERVER_INFO_GETS=1"])


def test_launch_reads_server_info_once_and_imports_no_load_generator(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_ready_to_body.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_ARGS}", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SERVER_INFO_GETS=1"])
