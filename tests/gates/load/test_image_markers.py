"""Image loads in the load markers: a pytest session against the simulator serving Qwen2-VL (issue 32 item 2).

``sglang_throughput(dataset="image:...")`` sends bench_serving's image requests; images and image tokens
per request and the TTFT with images reach the test body (``sglang_gate.load.images``), the terminal
summary and the JSON report (validated against the schema); a bad image option or a missing MMMU file is
an error that names the keyword, the value and the fix, and sends nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_sglang.sglang.vision import QWEN2_VL

ROOT = Path(__file__).parents[3]
LAUNCH = "--model-path sim/Qwen2-VL-7B-Instruct --sim-vision qwen2-vl --sim-time-scale 0.05 --enable-metrics"
TOKENS = 2 * QWEN2_VL.grid(640, 360).tokens  # the simulator's count, which test_real_images checks on 0.5.23
INNER = f"""
import pytest


@pytest.mark.sglang_throughput(dataset="image:count=2,resolution=360p,format=png", api="chat", requests=6,
                               concurrency=3, input_len=16, output_len=4)
def test_image_load(sglang_gate):
    images = sglang_gate.load.images
    assert sglang_gate.load.completed == 6
    assert images["images_per_request"] == 2 and images["image_tokens_per_request"] >= {TOKENS}
"""


def test_an_image_load_reports_its_images(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rfE", f"--sglang-report={report}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["    images: 2 per request, * image tokens per request (*",
                                 "*with images mean * ms, p99 * ms"])
    data = json.loads(report.read_text())
    jsonschema.validate(data, json.loads((ROOT / "schemas" / "report.schema.json").read_text()))
    images = next(t["loads"][0] for t in data["tests"] if t["loads"])["images"]
    assert images["requests_with_images"] == 6 and images["image_tokens_per_request"] >= TOKENS


BAD = """
import pytest


@pytest.mark.sglang_throughput(dataset="image:format=tiff", api="chat", requests=4)
def test_format():
    pass


@pytest.mark.sglang_throughput(dataset="image:count=0", api="chat", requests=4)
def test_count():
    pass


@pytest.mark.sglang_throughput(dataset="image", requests=4)
def test_native_without_placeholder():
    pass


@pytest.mark.sglang_throughput(dataset="mmmu:/nonexistent.jsonl", api="chat", requests=4)
def test_missing_mmmu():
    pass
"""


def test_a_bad_image_dataset_names_the_keyword_and_sends_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=BAD)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rfE")
    result.assert_outcomes(errors=4)
    for line in (
        "@pytest.mark.sglang_throughput(dataset='image:format=tiff'): format='tiff' is not an image format "
        "bench_serving sends. Fix: use format=png or format=jpeg",
        "@pytest.mark.sglang_throughput(dataset='image:count=0'): count='0' is not a whole number from 1 to 64. *",
        "@pytest.mark.sglang_throughput(api='native'): sends dataset image's images in image_data, *Fix: add "
        "image_token=PLACEHOLDER*",
        "@pytest.mark.sglang_throughput(dataset='/nonexistent.jsonl'): cannot be read (No such file or directory)*",
    ):
        result.stdout.fnmatch_lines([f"*{line}"])
    assert "sglang: sent to the server by this run" not in result.stdout.str()
