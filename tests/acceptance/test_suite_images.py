"""The suite's image checks against the simulator as a subprocess: healthy passes, each image fault is caught."""

from __future__ import annotations

import pytest

from tests.conftest import SimFactory

SUITE = ("--pyargs", "pytest_sglang.acceptance", "-p", "no:cacheprovider", "-rs")
IMAGES = ("-k", "test_images")
#: Kimi-K2.5's processor at real time with a slow prefill: the encoder's share (a third, healthy) stands well
#: clear of the request overheads a busy runner adds.
KIMI = ("--model-path", "moonshotai/Kimi-K2.5", "--sim-time-scale", "1", "--sim-prefill-tok-s", "2000")
IMAGE_TESTS = 7


def test_the_image_checks_pass_on_a_healthy_vision_model(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory(*KIMI)
    result = pytester.runpytest_subprocess(*SUITE, *IMAGES, f"--sglang-url={sim.url}", "-v")
    # 0.5.23 answers a decompression bomb with a 500 (the simulator as real 0.5.23): the one finding
    result.assert_outcomes(passed=IMAGE_TESTS - 1, failed=1)
    result.stdout.fnmatch_lines_random(["*test_images.py::test_image_tokens PASSED*",
                                        "*test_images.py::test_bad_images_4xx FAILED*",
                                        "*acceptance image tokens (kimi-k2.5 arithmetic)*"])
    out = result.stdout.str()
    assert "oversize image (400 MP) on chat: expected a 4xx answer, got HTTP 500" in out
    assert "oversize image (400 MP) on /generate: expected a 4xx answer, got HTTP 500 'Internal Server Error'" in out
    assert "bad images refused: 2 problems" in out  # the corrupt PNG and the SVG get their 400s


def test_the_token_check_follows_the_other_processor(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--model-path", "Qwen/Qwen2-VL-7B-Instruct")
    select = ("-k", "test_images and (tokens or native)")
    result = pytester.runpytest_subprocess(*SUITE, *select, f"--sglang-url={sim.url}", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*acceptance image tokens (qwen2-vl arithmetic)*"])


def test_a_text_only_server_skips_the_image_checks_with_the_reason(pytester: pytest.Pytester,
                                                                    sim_factory: SimFactory) -> None:
    sim = sim_factory()
    result = pytester.runpytest_subprocess(*SUITE, *IMAGES, f"--sglang-url={sim.url}")
    result.assert_outcomes(skipped=IMAGE_TESTS)
    reason = ("the served model (sim/tiny-llama) has no image understanding (/model_info has_image_understanding "
              "is false): image checks need a vision-language model")
    assert reason in result.stdout.str()


@pytest.mark.parametrize(("fault", "failed", "says"), [
    ("image-ignored", ["test_chat_images[one-image]", "test_chat_images[three-images]", "test_native_image_data",
                       "test_image_stream_agrees"], "expected the colour(s) red, the answer names none"),
    ("image-tokens-miscounted", ["test_image_tokens"], "the kimi-k2.5 processor counts +1192 (1196 image tokens)"),
    ("vision-slow:10", ["test_vision_encoder_share"], "over max_vision_share 0.5 (--sglang-acceptance-max-vision"),
])
def test_each_image_fault_fails_its_check(pytester: pytest.Pytester, sim_factory: SimFactory, fault: str,
                                          failed: list[str], says: str) -> None:
    sim = sim_factory(*KIMI, "--sim-fault", fault)
    select = ("-k", "test_images and not bad_images")  # the bomb's 500 is 0.5.23's, not the fault's
    result = pytester.runpytest_subprocess(*SUITE, *select, f"--sglang-url={sim.url}", "-v")
    result.assert_outcomes(failed=len(failed), passed=IMAGE_TESTS - 1 - len(failed))
    result.stdout.fnmatch_lines_random([f"*test_images.py::{name.replace('[', '[[]')} FAILED*" for name in failed])
    assert says in result.stdout.str()


def test_a_bad_max_vision_share_is_a_usage_error(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory(*KIMI)
    result = pytester.runpytest_subprocess(*SUITE, *IMAGES, f"--sglang-url={sim.url}",
                                           "--sglang-acceptance-max-vision-share=2")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--sglang-acceptance-max-vision-share='2': must be a fraction between 0 and 1*"])
