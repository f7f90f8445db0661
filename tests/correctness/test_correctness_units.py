"""Units of the correctness engine: no server (answers built by hand, in SGLang 0.5.23's shapes)."""

from __future__ import annotations

import math

import pytest

from pytest_sglang.correctness import AcceptanceSettings, CheckReport, read_features
from pytest_sglang.correctness.concurrency import batch_sizes
from pytest_sglang.correctness.golden import _divergence
from pytest_sglang.correctness.http import Reply, StreamReply, _feed
from pytest_sglang.correctness.kl import k3
from pytest_sglang.correctness.openai_checks import pick_stop
from pytest_sglang.correctness.openai_sampling import textless_drops_only
from pytest_sglang.correctness.result import MAX_SHOWN, CheckFailed
from pytest_sglang.correctness.shapes import from_reply, from_stream
from pytest_sglang.correctness.tools import call_problem, merge_deltas
from pytest_sglang.errors import ConfigError


def _chunk(content: str | None = None, finish: object = None, rid: str = "a") -> dict[str, object]:
    delta = {} if content is None else {"content": content}
    return {"id": rid, "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _stream(*events: dict[str, object], done: bool = True) -> StreamReply:
    return StreamReply(200, events=list(events), done=done)


def test_stream_with_empty_finish_reason_is_one_problem_per_answer() -> None:
    answer = from_stream("chat", _stream(_chunk("a", ""), _chunk("b", ""), _chunk(None, "stop")))
    assert answer.choice(0).text == "ab"
    assert [p for p in answer.problems if 'finish_reason is ""' in p] == [
        'chunk 0 choice 0: finish_reason is "" (an empty string breaks OpenAI clients; it must be null until '
        "the choice ends)"]


def test_stream_without_done_or_final_reason_or_with_data_after_done() -> None:
    reply = _stream(_chunk("a"), done=False)
    reply.after_done = 0
    answer = from_stream("chat", reply)
    assert "the stream did not end with 'data: [DONE]'" in answer.problems
    assert "choice 0: no chunk carried a finish_reason" in answer.problems
    late = _stream(_chunk("a", "stop"))
    late.after_done = 2
    assert "2 data line(s) came after [DONE]" in from_stream("chat", late).problems


def test_output_after_finish_reason_and_unknown_reason_are_faults() -> None:
    answer = from_stream("chat", _stream(_chunk("a", "stop"), _chunk("b")))
    assert "chunk 1: choice 0 got more output after its finish_reason" in answer.problems
    batch = Reply(200, body={"id": "x", "object": "chat.completion", "created": 1, "model": "m", "usage": {},
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                          "finish_reason": "eos"}]})
    expected = "choice 0: finish_reason is 'eos', expected one of stop, length, tool_calls"
    assert expected in from_reply("chat", batch).problems


def test_usage_chunk_must_come_last_with_no_choices() -> None:
    usage = {"id": "a", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
             "usage": {"completion_tokens": 1}}
    good = from_stream("chat", _stream(_chunk("a", "stop"), usage), include_usage=True)
    assert good.problems == [] and good.usage == {"completion_tokens": 1}
    missing = from_stream("chat", _stream(_chunk("a", "stop")), include_usage=True)
    assert "stream_options.include_usage was set but no chunk carried usage" in missing.problems
    early = from_stream("chat", _stream(usage, _chunk("a", "stop")), include_usage=True)
    assert any("the usage chunk must be the last one" in p for p in early.problems)


def test_sse_lines_are_framed_like_sglang() -> None:
    reply = StreamReply(200)
    for line in ['data: {"a": 1}', "", ": comment", "data: not json", "data: [DONE]", 'data: {"b": 2}']:
        _feed(reply, line)
    assert reply.events == [{"a": 1}] and reply.bad_lines == ["not json"] and reply.done and reply.after_done == 1


def test_k3_is_zero_for_equal_logprobs_and_grows_with_the_gap() -> None:
    assert k3([-1.0, -2.0], [-1.0, -2.0]) == 0
    assert k3([-1.0], [-1.5]) == pytest.approx(math.expm1(0.5) - 0.5)
    assert 0 < k3([-1.0], [-1.1]) < k3([-1.0], [-1.5])
    with pytest.raises(ValueError, match="equally long"):
        k3([-1.0], [])


def test_pick_stop_takes_the_latest_first_occurrence_and_avoids_the_reasoning() -> None:
    assert pick_stop(" o world o world") == "world"
    assert pick_stop("single") is None
    assert pick_stop("alpha beta gamma", avoid="I think gamma") == "beta"


def test_tool_call_deltas_merge_by_index_and_are_validated() -> None:
    calls = merge_deltas([
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "add_numbers", "arguments": '{"a": 1'}},
        {"index": 0, "function": {"arguments": ', "b": 2}'}},
    ])
    assert calls == [{"id": "c1", "type": "function", "function": {"name": "add_numbers",
                                                                    "arguments": '{"a": 1, "b": 2}'}}]
    assert call_problem(calls[0]) is None
    bad = {"type": "function", "function": {"name": "add_numbers", "arguments": '{"a": "one", "b": 2}'}}
    assert "violate the schema: 'one' is not of type 'integer'" in (call_problem(bad) or "")
    assert "was not offered" in (call_problem({"function": {"name": "rm_rf", "arguments": "{}"}}) or "")
    assert "are not JSON" in (call_problem({"function": {"name": "add_numbers", "arguments": "{a"}}) or "")


def test_features_from_sglang_0_5_23_server_info() -> None:
    info = {"served_model_name": "m", "tool_call_parser": None, "reasoning_parser": "qwen3",
            "grammar_backend": "outlines", "enable_deterministic_inference": False, "disable_radix_cache": False,
            "max_running_requests": None, "dp_size": 2,
            "internal_states": [{"effective_max_running_requests_per_dp": 48}]}
    f = read_features(info, {"data": [{"id": "m", "max_model_len": 2048}]})
    assert (f.model, f.context_length, f.max_running_requests, f.reasoning_parser) == ("m", 2048, 96, "qwen3")
    from pytest_sglang.correctness import Unsupported

    with pytest.raises(Unsupported, match="no --tool-call-parser"):
        f.need_tool_parser()
    with pytest.raises(Unsupported, match="takes no EBNF"):
        f.need_grammar("ebnf")
    f.need_grammar("regex")  # outlines takes regex


def test_settings_validate_every_field_by_name() -> None:
    with pytest.raises(ConfigError, match=r"AcceptanceSettings\(samples=...\)=0: must be an integer >= 1"):
        AcceptanceSettings(samples=0)
    with pytest.raises(ConfigError, match="min_match_rate"):
        AcceptanceSettings(min_match_rate=1.5)
    with pytest.raises(ConfigError, match="max_kl"):
        AcceptanceSettings(max_kl=float("nan"))


def test_report_lists_problems_and_figures_and_caps_the_list() -> None:
    report = CheckReport("demo", problems=[f"p{i}" for i in range(MAX_SHOWN + 3)], figures={"rate": 0.5})
    with pytest.raises(CheckFailed) as info:
        report.raise_if_failed()
    text = str(info.value)
    assert text.startswith(f"demo: {MAX_SHOWN + 3} problems\n  - p0")
    assert "  ... and 3 more" in text and "measured: rate=0.5" in text
    assert isinstance(info.value, AssertionError)


def test_batch_sizes_and_divergence() -> None:
    assert batch_sizes(8) == [1, 2, 4, 8] and batch_sizes(6) == [1, 2, 4, 6]
    assert _divergence([1, 2, 3], [1, 2, 3]) is None
    assert _divergence([1, 2, 3], [1, 9, 3]) == 1
    assert _divergence([1, 2, 3], [1, 2]) == 2


def _entries(*tokens: str) -> list[dict[str, object]]:
    return [{"token": t, "logprob": -0.1} for t in tokens]


@pytest.mark.parametrize("streamed", [("a", "b", "c"), ("a", "c"), ("a",)], ids=["all", "no-special", "no-partial"])
def test_a_chat_stream_may_lose_only_tokens_without_text(streamed: tuple[str, ...]) -> None:
    # "" is a skipped special token, U+FFFD a partial UTF-8 character: SGLang streams no chunk for either
    batch = _entries("a", "", "\ufffd", *(("b", "c") if len(streamed) == 3 else ("c",) if len(streamed) == 2 else ()))
    assert textless_drops_only(batch, _entries(*streamed)) is None


def test_a_chat_stream_losing_a_token_with_text_is_named() -> None:
    problem = textless_drops_only(_entries("a", "b", "", "c"), _entries("a", "c"))
    assert problem is not None and problem.startswith("the stream lost token 1 ('b') that has text of its own")


def test_a_chat_stream_entry_missing_from_the_batch_answer_is_named() -> None:
    problem = textless_drops_only(_entries("a", ""), _entries("a", "z"))
    assert problem == "streamed entry 1 ('z') is not in the unstreamed answer"
