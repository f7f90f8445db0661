"""The shipped acceptance suite against real SGLang 0.5.23 on CPU, serving the trained arithmetic model.

``pytest --pyargs pytest_sglang.acceptance --sglang-url URL`` as a user runs it: every check the
server offers passes; a check needing a feature this launch does not have (no tool-call or
reasoning parser, no deterministic inference: its attention backends need a GPU) is skipped with
that reason. The outcome of every check is printed (``-s`` shows it), so a CI log tells what real
SGLang exercised.

Real SGLang behaviour the checks allow for: 0.5.23's chat stream sends a chunk only for a step whose
text delta is not empty (serving_chat.py: "an empty-delta step has no chunk to attach to"), so a token
without text (a skipped special token, a partial UTF-8 character) loses its logprobs entry.
``test_logprobs[chat-stream]`` accepts exactly those losses, checked against the same request
unstreamed and the server's own decode of each lost token (``/v1/detokenize`` with the request's
``skip_special_tokens``); test_real_textless.py covers it on the Llama-3 special tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest
from realsgl import RawServer, junit_outcomes

pytestmark = pytest.mark.real_sglang

Launch = Callable[..., AbstractContextManager[dict[str, RawServer]]]  # the arith_launch fixture
#: Checks this launch cannot offer -> the words their skip reason must contain.
EXPECTED_SKIPS = {
    "test_openai_api.py::test_seed[chat]": "only with --enable-deterministic-inference",
    "test_openai_api.py::test_seed[completions]": "only with --enable-deterministic-inference",
    "test_tool_calls.py::test_tool_calls[batch]": "no --tool-call-parser",
    "test_tool_calls.py::test_tool_calls[stream]": "no --tool-call-parser",
    "test_reasoning.py::test_reasoning[batch]": "no --reasoning-parser",
    "test_reasoning.py::test_reasoning[stream]": "no --reasoning-parser",
    # the arithmetic model is text only: /model_info has_image_understanding is false
    **{f"test_images.py::{name}": "has no image understanding (/model_info has_image_understanding is false)"
       for name in ("test_chat_images[one-image]", "test_chat_images[three-images]", "test_native_image_data",
                    "test_image_stream_agrees", "test_image_tokens", "test_bad_images_4xx",
                    "test_vision_encoder_share")},
}
#: A tiny model knows no JSON: where the grammar allows whitespace anywhere it writes "\r" until
#: max_tokens. This SGLang flag takes whitespace out of JSON grammars (the check's message names it).
NO_JSON_WHITESPACE = ("--constrained-json-disable-any-whitespace",)


@pytest.fixture(scope="module")
def server(arith_launch: Launch) -> Iterator[RawServer]:
    with arith_launch(good=NO_JSON_WHITESPACE) as launched:
        yield launched["good"]


def test_acceptance_suite_against_real_sglang(server: RawServer, pytester: pytest.Pytester) -> None:
    # 4 requests per check instead of 8: half the time, every check still exercised on every route.
    result = pytester.runpytest_subprocess("--pyargs", "pytest_sglang.acceptance", f"--sglang-url={server.url}",
                                           "--sglang-acceptance-samples=4", "--junitxml=acceptance.xml",
                                           "--sglang-allow-disruptive",  # the server is ours: flushes are fine
                                           "-p", "no:cacheprovider", "-rA")
    outcomes = junit_outcomes(pytester.path / "acceptance.xml")
    print("\n".join(f"{outcome:8} {name}  {message[:200]}" for name, (outcome, message) in sorted(outcomes.items())))
    broken = {name: msg for name, (outcome, msg) in outcomes.items() if outcome in ("failure", "error")}
    assert not broken, "acceptance checks failing against real SGLang:\n" + "\n".join(
        f"{name}: {msg}" for name, msg in broken.items())
    skipped = {name: msg for name, (outcome, msg) in outcomes.items() if outcome == "skipped"}
    assert skipped.keys() == EXPECTED_SKIPS.keys(), skipped
    for name, words in EXPECTED_SKIPS.items():
        assert words in skipped[name], (name, skipped[name])
    passed = [name for name, (outcome, _) in outcomes.items() if outcome == "passed"]
    assert len(passed) == len(outcomes) - len(EXPECTED_SKIPS) >= 40, sorted(passed)
    assert result.ret == 0
