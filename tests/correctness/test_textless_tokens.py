"""The chat-stream logprobs check decides "a token without text" as SGLang 0.5.23 decodes.

The fake server below answers like real SGLang serving a Llama-3 tokenizer (measured against 0.5.23
with scripts/real-sglang's tiny Llama): the logprobs' token strings name special tokens
(``<|start_header_id|>``), the stream decodes with the request's ``skip_special_tokens`` (default True)
and sends no chunk for a step whose text delta is empty, ``return_token_ids`` puts the output ids in
``response_token_ids``, and ``/v1/detokenize`` decodes with the flag it is given.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from pytest_sglang.correctness import AcceptanceSettings, CheckContext
from pytest_sglang.correctness.detokenize import (
    AloneDecodes,
    response_token_ids,
    skip_special_tokens,
)
from pytest_sglang.correctness.features import ServerFeatures
from pytest_sglang.correctness.openai_sampling import check_logprobs, lost_entries, textless_drops_only

#: token id -> its string; ids 0-2 are special (as Llama-3's <|begin_of_text|>, <|eot_id|>, ...).
VOCAB = {0: "<|begin_of_text|>", 1: "<|eot_id|>", 2: "<|start_header_id|>", 59: "V", 60: " Paris", 101: "\ufffd"}
SPECIAL = {0, 1, 2}
#: What the model writes, greedy: a special token first, as the tiny Llama with dummy weights does.
OUTPUT = [2, 59, 60, 1, 59, 101, 59, 60]


def _decode(ids: list[int], skip: bool) -> str:
    return "".join(VOCAB[t] for t in ids if not (skip and t in SPECIAL))


@dataclass
class FakeSGLang:
    """The routes the check uses, as real SGLang 0.5.23 answers them."""

    #: Token ids the stream also drops (a broken server), besides empty-delta steps.
    broken_drops: set[int] = field(default_factory=set)
    detokenize_status: int = 200
    token_ids: bool = True
    seen: list[dict[str, object]] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.seen.append({"path": request.url.path, **body})
        if request.url.path == "/v1/detokenize":
            if self.detokenize_status != 200:
                return httpx.Response(self.detokenize_status, json={"detail": "Not Found"})
            texts = [_decode(ids, bool(body.get("skip_special_tokens", True))) for ids in body["tokens"]]
            return httpx.Response(200, json={"text": texts})
        ids = OUTPUT[: body["max_tokens"]]
        skip = bool(body.get("skip_special_tokens", True))
        entries = [{"token": VOCAB[t], "logprob": -0.5, "bytes": list(VOCAB[t].encode()),
                    "top_logprobs": [{"token": VOCAB[t], "logprob": -0.5}, {"token": "a", "logprob": -1.0},
                                     {"token": "b", "logprob": -2.0}]} for t in ids]
        if not body.get("stream"):
            choice: dict[str, object] = {"index": 0, "message": {"role": "assistant", "content": _decode(ids, skip)},
                                         "finish_reason": "length", "logprobs": {"content": entries}}
            if body.get("return_token_ids") and self.token_ids:
                choice["response_token_ids"] = ids
            return httpx.Response(200, json=self._wrap("chat.completion", [choice], len(ids)))
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=b"".join(self._events(ids, entries, skip)))

    def _events(self, ids: list[int], entries: list[dict[str, object]], skip: bool) -> Iterator[bytes]:
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        yield self._sse(self._wrap("chat.completion.chunk", [first]))
        for k, t in enumerate(ids):
            delta = _decode([t], skip)
            if not delta or "\ufffd" in delta or t in self.broken_drops:
                continue  # serving_chat.py: an empty-delta step has no chunk (a held-back partial character)
            chunk = {"index": 0, "delta": {"content": delta}, "logprobs": {"content": [entries[k]]},
                     "finish_reason": None}
            yield self._sse(self._wrap("chat.completion.chunk", [chunk]))
        last = {"index": 0, "delta": {}, "finish_reason": "length"}
        yield self._sse(self._wrap("chat.completion.chunk", [last]))
        yield b"data: [DONE]\n\n"

    @staticmethod
    def _wrap(kind: str, choices: list[dict[str, object]], tokens: int | None = None) -> dict[str, object]:
        out: dict[str, object] = {"id": "r1", "object": kind, "created": 1, "model": "tiny", "choices": choices}
        if tokens is not None:
            out["usage"] = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens}
        return out

    @staticmethod
    def _sse(payload: dict[str, object]) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()


def _context(server: FakeSGLang) -> CheckContext:
    features = ServerFeatures(model="tiny", context_length=2048, tool_call_parser=None, reasoning_parser=None,
                              grammar_backend=None, deterministic=False, radix_cache=True, max_running_requests=None,
                              incremental_stream=False, hicache=False)
    client = httpx.Client(base_url="http://sglang.test", transport=httpx.MockTransport(server.handle))
    settings = AcceptanceSettings(samples=2, max_tokens=len(OUTPUT), concurrency=1, request_timeout_s=10.0)
    return CheckContext(client, features, settings)


def test_a_special_token_skipped_by_the_stream_is_not_a_loss_of_text() -> None:
    # Before: "the stream lost token 0 ('<|start_header_id|>') that has text of its own" on every prompt.
    server = FakeSGLang()
    report = check_logprobs(_context(server), "chat", stream=True)
    assert report.problems == []
    detokenized = [s for s in server.seen if s["path"] == "/v1/detokenize"]
    # Only the losses the token strings cannot explain are asked about, with the request's flag.
    assert detokenized and all(s["skip_special_tokens"] is True for s in detokenized)
    assert detokenized[0]["tokens"] == [[2], [1]]


def test_a_lost_token_with_text_is_still_named() -> None:
    report = check_logprobs(_context(FakeSGLang(broken_drops={60})), "chat", stream=True)
    assert report.problems, "a stream that drops ' Paris' must fail"
    assert "the stream lost token 2 (' Paris') that has text of its own (the server decodes it alone to " \
           "' Paris' with skip_special_tokens=True" in report.problems[0]


def test_without_the_servers_word_a_special_tokens_name_counts_as_text() -> None:
    # A server without /v1/detokenize: the loss is judged by the token string, and the message says why.
    report = check_logprobs(_context(FakeSGLang(detokenize_status=404)), "chat", stream=True)
    assert report.problems
    assert "lost token 0 ('<|start_header_id|>')" in report.problems[0]
    assert "POST /v1/detokenize gave HTTP 404" in report.problems[0]


def test_without_token_ids_the_message_says_so() -> None:
    report = check_logprobs(_context(FakeSGLang(token_ids=False)), "chat", stream=True)
    assert report.problems and "the unstreamed answer gave no response_token_ids" in report.problems[0]


def _entries(*tokens: str) -> list[dict[str, object]]:
    return [{"token": t, "logprob": -0.1} for t in tokens]


def test_the_decision_follows_the_servers_decode_and_its_flag() -> None:
    batch, streamed = _entries("<|eot_id|>", "a", "b"), _entries("a", "b")
    # skip_special_tokens=True: SGLang decodes <|eot_id|> to "" and sends no chunk for it.
    assert textless_drops_only(batch, streamed, AloneDecodes({0: ""}), skip=True) is None
    # skip_special_tokens=False: it decodes to its name, so the stream must have carried it.
    problem = textless_drops_only(batch, streamed, AloneDecodes({0: "<|eot_id|>"}), skip=False)
    assert problem is not None
    assert problem.startswith("the stream lost token 0 ('<|eot_id|>') that has text of its own (the server "
                              "decodes it alone to '<|eot_id|>' with skip_special_tokens=False")
    # A partial UTF-8 character decodes alone to U+FFFD: held back by the detokenizer, no text of its own.
    assert textless_drops_only(_entries("x", "a"), _entries("a"), AloneDecodes({0: "\ufffd"})) is None


def test_lost_entries_are_matched_in_order() -> None:
    assert lost_entries(_entries("s", "a", "\ufffd", "a"), _entries("a", "a")) == ([0, 2], None)
    _, problem = lost_entries(_entries("a"), _entries("a", "z"))
    assert problem == "streamed entry 1 ('z') is not in the unstreamed answer"


@pytest.mark.parametrize(("body", "expected"), [({}, True), ({"skip_special_tokens": False}, False),
                                                ({"skip_special_tokens": True}, True),
                                                ({"skip_special_tokens": "no"}, True)])
def test_the_requests_own_skip_special_tokens_is_honoured(body: dict[str, object], expected: bool) -> None:
    assert skip_special_tokens(body) is expected


def test_response_token_ids_are_read_only_when_they_are_ids() -> None:
    assert response_token_ids({"response_token_ids": [2, 59]}) == [2, 59]
    assert response_token_ids({"response_token_ids": [2, "x"]}) is None
    assert response_token_ids({"response_token_ids": [True]}) is None
    assert response_token_ids(None) is None
