"""Stream readers fed with the recorded SGLang 0.5.23 streams (times taken from the capture)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_sglang.loadgen.client.streams import make_reader, request_body
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.datasets import Prompt
from pytest_sglang.loadgen.shape.spec import LoadSpec

CAPTURES = Path(__file__).parents[2] / "fixtures" / "captures-0.5.23" / "basic"
_LINE = re.compile(r"^\[\+([0-9.]+)s\] data: (.*)$")


def capture(name: str) -> list[tuple[float, bytes]]:
    out = []
    for line in (CAPTURES / name).read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if m:
            out.append((float(m.group(1)), m.group(2).encode()))
    return out


def read(
    api: str, events: list[tuple[float, bytes]], expected: int, ignore_eos: bool = True
) -> RequestRecord:
    reader = make_reader(api, RequestRecord(index=0, expected_output_len=expected), 0.0, ignore_eos)
    for t, payload in events:
        reader.feed(t, payload)
    return reader.finish()


def test_native_capture_ttft_itl_spread_over_multi_token_chunk() -> None:
    rec = read("native", capture("generate_stream.txt"), 8)
    assert rec.success, rec.error
    assert rec.ttft == pytest.approx(0.0448)
    assert rec.output_len == 8 and rec.prompt_len == 3
    # chunks at .0469 (2 tok), .0545 (3), .0578 (4), .0615 (5), .0714 (7: two new tokens), .0774 (8)
    expected = [0.0021, 0.0076, 0.0033, 0.0037, 0.0099 / 2, 0.0099 / 2, 0.0060]
    assert rec.itl == pytest.approx(expected, abs=1e-9)
    assert len(rec.itl) == rec.output_len - 1
    assert rec.e2e == pytest.approx(0.0775)  # the [DONE] line


def test_chat_capture_raw_gap_per_content_chunk() -> None:
    # Recorded without usage: bench_serving's fallback is the requested length.
    rec = read("chat", capture("chat_completions_stream.txt"), 6)
    assert rec.success, rec.error
    assert rec.ttft == pytest.approx(0.0349)  # the role chunk has empty content: not a token
    assert rec.itl == pytest.approx([0.0134, 0.0078])
    assert rec.output_len == 6


def test_openai_usage_chunk_gives_server_count_and_checks_it() -> None:
    events = [
        (
            0.1,
            json.dumps(
                {"choices": [{"index": 0, "text": "a", "finish_reason": None}], "usage": None}
            ).encode(),
        ),
        (
            0.2,
            json.dumps(
                {"choices": [{"index": 0, "text": "b", "finish_reason": "length"}], "usage": None}
            ).encode(),
        ),
        (0.2, json.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}).encode()),
        (0.3, b"[DONE]"),
    ]
    rec = read("completions", events, 2)
    assert rec.success and rec.output_len == 2 and rec.prompt_len == 5
    rec = read("completions", events, 4)
    assert rec.error_kind == "token_count"
    assert rec.error == "got 2 tokens, asked for 4 with ignore_eos"
    assert read("completions", events, 4, ignore_eos=False).success


def test_in_band_error_object_fails_request() -> None:
    events = [
        *capture("generate_stream.txt")[:2],
        (0.05, b'{"error":{"message":"boom","type":"invalid_request_error","code":400}}'),
        (0.06, b"[DONE]"),
    ]
    rec = read("native", events, 8)
    assert rec.error_kind == "stream_error" and rec.error == "boom"


def test_cut_off_stream_without_done_is_truncated() -> None:
    rec = read("native", capture("generate_stream.txt")[:3], 8)
    assert rec.error_kind == "truncated"
    assert rec.error == "stream ended without [DONE] after 3 tokens (3 chunks)"


def test_done_without_finish_reason_is_truncated() -> None:
    rec = read("native", [*capture("generate_stream.txt")[:3], (0.1, b"[DONE]")], 8)
    assert rec.error_kind == "truncated" and "finish_reason" in (rec.error or "")


def test_no_tokens() -> None:
    events = [
        (0.1, b'{"text":"","meta_info":{"completion_tokens":0,"finish_reason":{"type":"stop"}}}'),
        (0.1, b"[DONE]"),
    ]
    rec = read("native", events, 8, ignore_eos=False)
    assert rec.error_kind == "no_tokens"


def test_abort_finish_reason() -> None:
    events = [
        (
            0.1,
            b'{"text":"x","meta_info":{"completion_tokens":1,"finish_reason":'
            b'{"type":"abort","message":"The request queue is full."}}}',
        ),
        (0.1, b"[DONE]"),
    ]
    rec = read("native", events, 1)
    assert rec.error_kind == "abort" and rec.error == "The request queue is full."


def test_wrong_token_count_with_ignore_eos() -> None:
    rec = read("native", capture("generate_stream.txt"), 16)
    assert rec.error_kind == "token_count" and rec.error == "got 8 tokens, asked for 16 with ignore_eos"


@pytest.mark.parametrize("api", ["native", "completions", "chat"])
def test_request_bodies_follow_bench_serving(api: str) -> None:
    spec = LoadSpec(api=api)
    body = request_body(spec, Prompt([11, 12], 2, 7))
    assert body["stream"] is True
    if api == "native":
        assert body == {
            "input_ids": [11, 12],
            "stream": True,
            "sampling_params": {"max_new_tokens": 7, "temperature": 0.0, "ignore_eos": True},
        }
    elif api == "completions":
        assert body["prompt"] == [11, 12] and body["max_tokens"] == 7 and body["ignore_eos"] is True
        assert body["stream_options"] == {"include_usage": True}
    else:
        assert body["messages"] == [{"role": "user", "content": "11 12"}]
        assert body["max_completion_tokens"] == 7
