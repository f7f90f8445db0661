"""SGLang 0.5.23's profiler routes on CPU, as ``--sglang-profile-on-failure`` drives them (issue 33 item 5).

``POST /start_profile`` with ``output_dir``, ``activities=["CPU"]`` and a ``profile_id``, four short requests,
``POST /stop_profile``: the torch profiler writes ``<profile_id>-TP-0.trace.json.gz`` on the server's host.
A failed throughput gate of a plugin run against the same server (attached, with consent) links that trace.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from realsgl import RawServer

from pytest_sglang.server.profile import profile_window

pytestmark = pytest.mark.real_sglang


def test_a_window_under_the_real_profiler_writes_a_chrome_trace(raw_server: RawServer, real_api_key: str,
                                                                tmp_path: Path) -> None:
    window = profile_window(raw_server.url, real_api_key, tmp_path / "trace", deadline_s=240, cpu=True,
                            profile_id="real-window")
    print(window.line())
    assert window.taken and not window.problem, window.line()
    assert [f.name for f in window.files] == ["real-window-TP-0.trace.json.gz"]
    trace = json.loads(gzip.decompress(window.files[0].read_bytes()))
    assert trace["traceEvents"], "an empty trace"
    assert window.size_bytes == window.files[0].stat().st_size > 0


FAILING = """
import pytest


@pytest.mark.sglang_throughput(min_output_tok_s=10_000_000, requests=2, concurrency=1, input_len=16, output_len=4)
def test_too_slow():
    pass
"""


def test_a_failed_gate_on_the_real_server_links_its_trace(raw_server: RawServer, real_api_key: str,
                                                          pytester: pytest.Pytester) -> None:
    traces = pytester.path / "traces"
    pytester.makepyfile(test_inner=FAILING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--sglang-url={raw_server.url}",
                                           f"--sglang-api-key={real_api_key}", "--sglang-allow-disruptive",
                                           f"--sglang-profile-on-failure={traces}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"profile after the failed throughput gate: trace in {traces}* (1 file, * KB, "
                                 "* s window)"])
    assert len(list(traces.glob("*/*.trace.json.gz"))) == 1
    assert real_api_key not in result.stdout.str()
