"""SGLang's native ``/generate``: the same promises in its own shape."""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext
from pytest_sglang.correctness import native_checks as native


@pytest.mark.parametrize("stream", [False, True], ids=["batch", "stream"])
def test_generate(sglang_acceptance: CheckContext, stream: bool) -> None:
    """Exact ``max_new_tokens`` with ``ignore_eos``; completion_tokens and logprobs match the ids."""
    run(native.check_native, sglang_acceptance, stream)


def test_generate_agreement(sglang_acceptance: CheckContext) -> None:
    """Batch, stream and a list of prompts give the same greedy ids."""
    run(native.check_native_agrees, sglang_acceptance)


def test_generate_stop_strings(sglang_acceptance: CheckContext) -> None:
    """``sampling_params.stop`` ends the text before the string."""
    run(native.check_native_stop, sglang_acceptance)
