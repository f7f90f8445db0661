"""Regression (issue 18): the chat-stream logprobs check decides "a token without text" as real SGLang does.

Real SGLang 0.5.23 serving a Llama-3 tokenizer (the tiny Llama's tokenizer has Llama-3's special
tokens: ``<|eot_id|>``, ``<|start_header_id|>``, ...) decodes a stream with ``skip_special_tokens``
(default True): a special token adds no text, its step sends no chunk, and its logprobs entry is lost,
while the logprobs' token string still names it. The check used to call that "the stream lost token 0
('<|start_header_id|>') that has text of its own", on every prompt of the dummy-weight model.

``logit_bias`` forces ``<|eot_id|>`` at every step, so the case does not depend on what random weights write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from realsgl import RawServer

from pytest_sglang.correctness import AcceptanceSettings, CheckContext, fetch_features
from pytest_sglang.correctness.detokenize import decode_alone
from pytest_sglang.correctness.openai_checks import ask
from pytest_sglang.correctness.openai_sampling import check_logprobs, stream_losses
from pytest_sglang.server.client import make_client

pytestmark = pytest.mark.real_sglang
TOKENS = 6


@pytest.fixture
def ctx(raw_server: RawServer, real_api_key: str) -> Iterator[CheckContext]:
    with make_client(raw_server.url, real_api_key) as client:
        yield CheckContext(client, fetch_features(client), AcceptanceSettings(samples=4, max_tokens=16))


def _special_ids(raw_server: RawServer) -> dict[str, int]:
    """The tokenizer's own special tokens (what the model folder declares), by name."""
    tokenizer = json.loads((raw_server.setup.model / "tokenizer.json").read_text())
    return {t["content"]: t["id"] for t in tokenizer["added_tokens"] if t.get("special")}


def _forced_eot(ctx: CheckContext, eot: int, **extra: Any) -> dict[str, Any]:
    return ctx.body("chat", 0, max_tokens=TOKENS, ignore_eos=True, logprobs=True, top_logprobs=3,
                    logit_bias={str(eot): 100}, **extra)


def test_the_shipped_check_passes_on_a_llama3_tokenizer(ctx: CheckContext) -> None:
    report = check_logprobs(ctx, "chat", stream=True)
    assert report.problems == [], report.problems


def test_the_server_decodes_a_special_token_to_nothing_only_when_skipping(raw_server: RawServer,
                                                                          ctx: CheckContext) -> None:
    special = _special_ids(raw_server)
    assert {"<|eot_id|>", "<|start_header_id|>"} <= special.keys(), special
    wanted = {0: special["<|eot_id|>"], 1: special["<|start_header_id|>"]}
    assert decode_alone(ctx, wanted, skip=True).texts == {0: "", 1: ""}
    assert decode_alone(ctx, wanted, skip=False).texts == {0: "<|eot_id|>", 1: "<|start_header_id|>"}


def test_a_stream_of_skipped_special_tokens_loses_their_entries_and_passes(raw_server: RawServer,
                                                                           ctx: CheckContext) -> None:
    body = _forced_eot(ctx, _special_ids(raw_server)["<|eot_id|>"])
    streamed = ask(ctx, "chat", body, stream=True).choice(0)
    # What real SGLang does: no chunk, so no logprobs entry, for a step that decodes to no text.
    assert streamed.logprobs == [] and streamed.text == ""
    assert stream_losses(ctx, body, streamed.logprobs) is None


def test_with_skip_special_tokens_false_the_tokens_have_text_and_must_be_streamed(raw_server: RawServer,
                                                                                   ctx: CheckContext) -> None:
    eot = _special_ids(raw_server)["<|eot_id|>"]
    keep = _forced_eot(ctx, eot, skip_special_tokens=False)
    streamed = ask(ctx, "chat", keep, stream=True).choice(0)
    assert [e["token"] for e in streamed.logprobs] == ["<|eot_id|>"] * TOKENS
    assert stream_losses(ctx, keep, streamed.logprobs) is None
    # The same losses as under the default are a fault when the request kept special tokens.
    problem = stream_losses(ctx, keep, [])
    assert problem is not None and problem.startswith(
        "the stream lost token 0 ('<|eot_id|>') that has text of its own (the server decodes it alone to "
        "'<|eot_id|>' with skip_special_tokens=False"), problem
