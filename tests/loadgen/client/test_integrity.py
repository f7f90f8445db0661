"""Hostile and broken streams: what arrived is counted, protocol breaks are named, nothing crashes the run."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from loadgen.loadgen_fake import FakeServer
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.client.http import MAX_ERROR_BODY, max_line_bytes
from pytest_sglang.loadgen.client.streams import make_reader
from pytest_sglang.loadgen.measure.record import RequestRecord

FAST: dict[str, Any] = dict(input_len=8, output_len=6, warmup=0, sample_server_metrics=False)


def read(api: str, chunks: list[object], expected: int, ignore_eos: bool = True) -> RequestRecord:
    reader = make_reader(api, RequestRecord(index=0, expected_output_len=expected), 0.0, ignore_eos)
    for i, chunk in enumerate(chunks):
        payload = chunk if isinstance(chunk, bytes) else json.dumps(chunk).encode()
        reader.feed(0.01 * (i + 1), payload)
    return reader.finish()


def native(n: int, ids: int | None, *, final: bool = False, claim: int | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"text": "x" * n}
    if ids is not None:
        chunk["output_ids"] = list(range(ids))
    fr = {"type": "length", "length": n} if final else None
    chunk["meta_info"] = {"completion_tokens": n if claim is None else claim, "finish_reason": fr}
    return chunk


def test_native_claim_beyond_the_output_ids_fails() -> None:
    # Two tokens arrived (cumulative output_ids), the last chunk claims eight.
    rec = read("native", [native(1, 1), native(2, 2, final=True, claim=8), b"[DONE]"], 8)
    assert rec.error_kind == "token_mismatch"
    assert rec.error == "server claimed 8 tokens, 2 arrived (output_ids)"


@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative", "incremental"])
def test_native_honest_streams_pass_in_both_streaming_modes(incremental: bool) -> None:
    # --incremental-streaming-output sends only the new ids in each chunk; the counts still agree.
    sizes = [1, 2, 4, 5]
    chunks = [native(n, (n - prev) if incremental else n, final=n == 5)
              for prev, n in zip([0, *sizes[:-1]], sizes, strict=True)]
    rec = read("native", [*chunks, b"[DONE]"], 5)
    assert rec.success, rec.error
    assert rec.output_len == 5 and len(rec.itl) == 4


def test_native_without_ids_more_text_chunks_than_claimed_tokens_fails() -> None:
    chunks = [native(n, None, claim=2, final=n == 3) for n in (1, 2, 3)]
    rec = read("native", [*chunks, b"[DONE]"], 2)
    assert rec.error_kind == "token_mismatch"
    assert rec.error == "server claimed 2 tokens, 3 chunks with new text arrived"


def _oai(text: str, *, finish: str | None = None, token_ids: list[int] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish}
    if token_ids is not None:
        choice["token_ids"] = token_ids
    return {"choices": [choice], "usage": None}


def test_completions_token_ids_must_match_usage() -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
    rec = read("completions", [_oai("a", token_ids=[1]), _oai("b", finish="length", token_ids=[2]), usage,
                               b"[DONE]"], 5)
    assert rec.error_kind == "token_mismatch" and rec.error == "server claimed 5 tokens, 2 arrived (token_ids)"


def test_chat_more_content_chunks_than_usage_claims_fails() -> None:
    def delta(text: str, finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}

    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    rec = read("chat", [delta("a"), delta("b"), delta("c"), delta("", "length"), usage, b"[DONE]"], 2)
    assert rec.error_kind == "token_mismatch"
    assert rec.error == "server claimed 2 tokens, 3 chunks with new text arrived"


def test_data_after_done_is_a_protocol_violation() -> None:
    rec = read("native", [native(1, 1, final=True), b"[DONE]", native(2, 2)], 1)
    assert rec.error_kind == "protocol"
    assert (rec.error or "").startswith("data after [DONE]: b'{\"text\": \"xx\"")


@pytest.mark.parametrize("payload", [b"[1, 2]", b'"text"', b"42", b'{"meta_info": [1], "text": 5}'])
def test_chunks_of_the_wrong_shape_fail_the_request_not_the_run(payload: bytes) -> None:
    rec = read("native", [payload, b"[DONE]"], 1)
    assert rec.error_kind in ("protocol", "truncated")


def test_an_absurd_claimed_count_is_refused_before_any_allocation() -> None:
    # 10**9 claimed tokens in one chunk would be a 10**9-entry ITL list (8 GB): refused instead.
    rec = read("native", [native(1, 1), native(2, 2, claim=10**9), native(3, 3, final=True), b"[DONE]"], 3)
    assert rec.error_kind == "protocol"
    assert rec.error == "server claimed 1000000000 tokens, asked for at most 3"
    assert len(rec.itl) <= 2


def test_claimed_tokens_not_sent_fail_end_to_end(fake_server: FakeServer) -> None:
    # The server sends 2 of the 6 tokens asked for and claims all 6 (the count ignore_eos checks).
    fake_server.behaviour.ids = True
    fake_server.behaviour.lie_short = 4
    result = run_load(fake_server.url, LoadSpec(requests=2, **FAST))
    assert result.errors == {"token_mismatch": 2}
    assert result.failure_examples() == ["request 0: token_mismatch: server claimed 6 tokens, 2 arrived (output_ids)"]


def test_chunk_after_done_end_to_end(fake_server: FakeServer) -> None:
    fake_server.behaviour.ids = True
    fake_server.behaviour.after_done = b'data: {"text":"late"}\n\n'
    result = run_load(fake_server.url, LoadSpec(requests=2, **FAST))
    assert result.errors == {"protocol": 2}
    assert result.first_failures["protocol"].startswith("request 0: protocol: data after [DONE]")


def test_ansi_and_control_characters_never_reach_the_record(fake_server: FakeServer) -> None:
    fake_server.behaviour.status = 500
    fake_server.behaviour.error_message = "\x1b[2J\x1b]0;pwned\x07boom\rhidden\x08 line\nnext"
    result = run_load(fake_server.url, LoadSpec(requests=1, **FAST))
    (example,) = result.failure_examples()
    assert example == "request 0: http_500: boomhidden line next"
    assert not any(ord(c) < 32 for c in example)


def test_an_endless_error_body_is_read_only_in_part(fake_server: FakeServer) -> None:
    fake_server.behaviour.status = 503
    fake_server.behaviour.endless_error = True
    started = time.monotonic()
    result = run_load(fake_server.url, LoadSpec(requests=2, request_timeout_s=20, **FAST))
    assert time.monotonic() - started < 10
    assert result.errors == {"http_503": 2}
    assert result.records[0].error is not None and len(result.records[0].error) <= 500
    assert MAX_ERROR_BODY == 64 * 1024


def test_an_endless_stream_line_is_cut_at_its_bound(fake_server: FakeServer) -> None:
    limit = max_line_bytes(6)
    fake_server.behaviour.long_line = 2 * limit
    started = time.monotonic()
    result = run_load(fake_server.url, LoadSpec(requests=1, request_timeout_s=20, **FAST))
    assert time.monotonic() - started < 10
    assert result.errors == {"protocol": 1}
    assert result.records[0].error == f"a stream line longer than {limit:,} bytes for 6 tokens"


def test_native_ids_that_fit_neither_streaming_mode_fail() -> None:
    # One id per chunk while the claimed count jumps by two: neither cumulative nor incremental.
    chunks = [native(1, 1), native(3, 1), native(5, 1, final=True)]
    rec = read("native", [*chunks, b"[DONE]"], 5)
    assert rec.error_kind == "token_mismatch" and rec.error == "server claimed 5 tokens, 1 arrived (output_ids)"
