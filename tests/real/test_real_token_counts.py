"""Exact token counts against real SGLang 0.5.23 on CPU (issue 33 item 6).

The tiny Llama has 401 tokens: 0.5.23 does not check a prompt's ``input_ids`` and dies on an id past its
embedding table, so random-ids drawn from the old fixed [10, 1000) killed it. The load now reads the
vocabulary from the server (its ``token_ids_logprob`` check) and the server lives; the tokens it counted
are compared with those sent, and a chat template's tokens are reported on ``api="chat"`` (flagged when the
user gives a tolerance: the default would fail every healthy server whose tokenizer splits the words).
"""

from __future__ import annotations

import json

import pytest
from realsgl import RawServer

from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.server.client import make_client

pytestmark = pytest.mark.real_sglang
SHAPE = dict(requests=8, concurrency=4, input_len=128, output_len=8)


def _alive(raw_server: RawServer, key: str) -> bool:
    with make_client(raw_server.url, key, timeout=30) as client:
        return client.get("/health").status_code == 200


def test_random_ids_draw_from_the_servers_vocabulary_and_it_lives(raw_server: RawServer, real_api_key: str) -> None:
    vocab = json.loads((raw_server.setup.model / "config.json").read_text())["vocab_size"]
    assert vocab < 1000  # the old fixed range would have killed it
    result = run_load(raw_server.url, LoadSpec(**SHAPE), api_key=real_api_key)
    assert result.completed == 8 and result.errors == {}, result.failure_examples()
    assert result.spec.vocab_size == vocab and result.workload["vocab"]["read"]
    tokens = result.prompt_tokens
    assert tokens["basis"] == "exact" and tokens["requests_compared"] == 8
    assert tokens["server_prompt_tokens"] == tokens["sent_prompt_tokens"] == 8 * 128, tokens
    assert evaluate_throughput(result).passed
    assert _alive(raw_server, real_api_key)
    print(evaluate_throughput(result).message())


def test_the_chat_template_is_counted_reported_and_flagged(raw_server: RawServer, real_api_key: str) -> None:
    result = run_load(raw_server.url, LoadSpec(**{**SHAPE, "api": "chat"}), api_key=real_api_key)
    assert result.completed == 8, result.failure_examples()
    tokens = result.prompt_tokens
    assert tokens["basis"] == "chat" and tokens["requests_compared"] == 8
    assert tokens["server_prompt_tokens"] > tokens["sent_prompt_tokens"], tokens  # template + tokenizer
    assert not tokens["flagged"] and evaluate_throughput(result).passed  # reported, not judged by default
    result = run_load(raw_server.url, LoadSpec(**{**SHAPE, "api": "chat", "prompt_token_tolerance_pct": 5.0}),
                      api_key=real_api_key)
    assert result.prompt_tokens["flagged"]
    outcome = evaluate_throughput(result)
    assert not outcome.passed and outcome.failed[0].metric == "prompt tokens (server/sent)"
    print(outcome.message())
