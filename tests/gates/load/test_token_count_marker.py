"""``sglang_throughput`` and exact token counts (issue 33 item 6): a pytest session against the simulator.

With ``--sim-fault template-tokens:16`` the server counts 16 tokens per prompt the client never sent: the
marker fails with the figures, where they came from and the fix; ``prompt_token_tolerance_pct=`` wide
enough passes the same load; a bad tolerance is a usage error naming the keyword.
"""

from __future__ import annotations

import pytest

LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --enable-metrics"
INNER = """
import pytest

SHAPE = dict(requests=8, concurrency=4, input_len=64, output_len=8)


@pytest.mark.sglang_throughput(**SHAPE)
def test_default_tolerance():
    pass


@pytest.mark.sglang_throughput(**SHAPE, prompt_token_tolerance_pct=30)
def test_wide_tolerance(sglang_gate):
    assert sglang_gate.load.prompt_tokens["difference_pct"] in (0.0, 25.0)  # healthy, or the fault's 16 of 64
"""


@pytest.mark.parametrize("fault", [True, False])
def test_added_template_tokens_fail_the_marker(pytester: pytest.Pytester, fault: bool) -> None:
    pytester.makepyfile(test_inner=INNER)
    launch = LAUNCH + (" --sim-fault template-tokens:16" if fault else "")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", launch, "-p", "no:cacheprovider",
                                           "-rfE")
    if not fault:  # the healthy twin: exact counts
        result.assert_outcomes(passed=2)
        assert "FLAGGED" not in result.stdout.str()
        return
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*sglang throughput gate failed: prompt tokens (server/sent) +25.0% (required == within 5%)*",
        "*640 counted, 512 sent (token ids sent)*",
        "*raise prompt_token_tolerance_pct=*",
    ])


@pytest.mark.parametrize("bad", ["-1", "1001", "'5'"])
def test_a_bad_tolerance_is_a_usage_error(pytester: pytest.Pytester, bad: str) -> None:
    pytester.makepyfile(test_inner=f"""
import pytest

@pytest.mark.sglang_throughput(prompt_token_tolerance_pct={bad})
def test_load():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-launch=--model-path x", "--sglang-command=/nonexistent/sglang")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*prompt_token_tolerance_pct*"])
