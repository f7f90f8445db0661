"""Errors, not hangs: bad requests get a prompt 4xx; a client that goes away frees its slot."""

from __future__ import annotations

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, slots
from pytest_sglang.correctness import error_checks as errors


def test_context_length_400(sglang_acceptance: CheckContext) -> None:
    """A prompt longer than the context length gets 400 with SGLang's message on every route."""
    run(errors.check_context_length, sglang_acceptance)


def test_malformed_json_4xx(sglang_acceptance: CheckContext) -> None:
    run(errors.check_malformed_json, sglang_acceptance)


def test_unknown_model_4xx(sglang_acceptance: CheckContext) -> None:
    """An unknown ``model:adapter`` gets a 4xx (SGLang serves any plain model name)."""
    run(errors.check_unknown_model, sglang_acceptance)


def test_negative_max_tokens_4xx(sglang_acceptance: CheckContext) -> None:
    run(errors.check_negative_max_tokens, sglang_acceptance)


def test_disconnect_frees_slot(sglang_acceptance: CheckContext) -> None:
    """After a client disconnects mid-stream, ``num_running_reqs`` is back to 0 (needs --enable-metrics)."""
    run(slots.check_disconnect, sglang_acceptance)
