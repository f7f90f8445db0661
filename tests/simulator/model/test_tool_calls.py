"""Tool calls with ``--tool-call-parser`` and reasoning with ``--reasoning-parser`` (batch and stream)."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest

from tests.conftest import SimFactory
from tests.simulator.sse import TOOLS, WEATHER, chat, deltas, events

#: The text each parser's detector parses in SGLang 0.5.23 (what the model writes before parsing).
NATIVE_MARKER = {
    "llama3": "<|python_tag|>",
    "qwen25": "<tool_call>",
    "mistral": "[TOOL_CALLS]",
    "deepseekv3": "<｜tool▁calls▁begin｜>",
}


@pytest.mark.parametrize("parser", sorted(NATIVE_MARKER))
def test_tool_call_parsed_batch_and_stream(sim_factory: SimFactory, parser: str) -> None:
    sim = sim_factory("--tool-call-parser", parser)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        body = chat(c, "What is the weather in Paris?", tools=TOOLS)
        choice = body["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["matched_stop"] is None
        assert choice["message"]["content"] == ""
        (call,) = choice["message"]["tool_calls"]
        assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"]) and call["type"] == "function"
        assert call["function"]["name"] == "get_weather"  # the tool the prompt mentions
        jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER)
        assert body["usage"]["completion_tokens"] > 0

        chunks = events(
            c,
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS, "temperature": 0},
        )
    assert chunks[-1] == "[DONE]"
    calls = [tc for d in deltas(chunks, "tool_calls") for tc in d]
    first, rest = calls[0], calls[1:]
    assert first["id"].startswith("call_") and first["function"] == {"name": "get_weather", "arguments": ""}
    assert rest and all(tc["id"] is None and tc["function"]["name"] is None for tc in rest)
    jsonschema.validate(json.loads("".join(tc["function"]["arguments"] for tc in rest)), WEATHER)
    assert deltas(chunks, "content") == [""]  # only the role chunk's empty content
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_without_a_parser_tools_are_answered_as_text(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        body = chat(c, "weather in Paris?", tools=TOOLS)
        required = chat(c, "weather in Paris?", tools=TOOLS, tool_choice="required")
    choice = body["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"
    assert choice["message"]["content"].startswith("<tool_call>\n{")
    # tool_choice "required" constrains the output to a JSON array, which 0.5.23 parses without a parser
    assert required["choices"][0]["finish_reason"] == "tool_calls"
    assert required["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_tool_choice_none_and_named(sim_factory: SimFactory) -> None:
    sim = sim_factory("--tool-call-parser", "qwen25")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        none = chat(c, "weather in Paris?", tools=TOOLS, tool_choice="none", max_tokens=8)
        named = chat(
            c, "weather in Paris?", tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}}
        )
    assert "tool_calls" not in none["choices"][0]["message"]
    assert named["choices"][0]["message"]["tool_calls"][0]["function"] == {"name": "get_time", "arguments": "{}"}


def test_reasoning_parser_separates_reasoning_batch_and_stream(sim_factory: SimFactory) -> None:
    sim = sim_factory("--reasoning-parser", "deepseek-r1")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        body = chat(c, "What is 6 * 7?")
        chunks = events(
            c,
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "What is 6 * 7?"}],
                "temperature": 0,
                "stream_options": {"include_usage": True},
            },
        )
        off = chat(c, "What is 6 * 7?", chat_template_kwargs={"enable_thinking": False})
        info = c.get("/server_info").json()
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] and "<think>" not in message["content"]
    assert message["content"].endswith("#### 42")
    assert body["usage"]["reasoning_tokens"] > 0
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": body["usage"]["reasoning_tokens"]}
    thoughts, answer = deltas(chunks, "reasoning_content"), deltas(chunks, "content")
    assert "".join(thoughts) == message["reasoning_content"] and "".join(answer) == message["content"]
    first_answer = next(i for i, ch in enumerate(chunks) if deltas([ch], "content") not in ([], [""]))
    assert all(not deltas([ch], "reasoning_content") for ch in chunks[first_answer:-1])  # thoughts come first
    assert chunks[-2]["usage"]["reasoning_tokens"] == body["usage"]["reasoning_tokens"]
    assert off["choices"][0]["message"]["reasoning_content"] is None
    assert info["reasoning_parser"] == "deepseek-r1" and info["tool_call_parser"] is None


def test_with_a_reasoning_parser_a_stream_keeps_every_logprob(sim_factory: SimFactory) -> None:
    """The <think> markup sends no text; 0.5.23 sends its logprobs alone, with a delta of only
    ``reasoning_content: null`` (serving_chat.py flushes leftovers when a parser is set)."""
    sim = sim_factory("--reasoning-parser", "deepseek-r1")
    body = {"messages": [{"role": "user", "content": "What is 6 * 7?"}], "max_tokens": 12, "ignore_eos": True,
            "logprobs": True, "top_logprobs": 2}
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        chunks = [ch for ch in events(c, "/v1/chat/completions", body) if isinstance(ch, dict)]
        batch = c.post("/v1/chat/completions", json=body).json()["choices"][0]["logprobs"]["content"]
    streamed = [e for ch in chunks if ch["choices"][0]["logprobs"] for e in ch["choices"][0]["logprobs"]["content"]]
    assert [e["token"] for e in streamed] == [e["token"] for e in batch] and len(streamed) == 12
    alone = [ch for ch in chunks if ch["choices"][0]["delta"] == {"reasoning_content": None}]
    assert alone and all(ch["choices"][0]["logprobs"]["content"][0]["token"] == "<think>" for ch in alone[:1])


def test_without_a_parser_the_think_text_stays_in_content(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        body = chat(c, "What is 6 * 7?", chat_template_kwargs={"enable_thinking": True})
        plain = chat(c, "What is 6 * 7?")
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] is None and message["content"].startswith("<think>")
    assert "</think>" in message["content"] and body["usage"]["reasoning_tokens"] == 0
    assert "<think>" not in plain["choices"][0]["message"]["content"]  # not a reasoning model by default


def test_parsers_show_in_server_and_model_info(sim_factory: SimFactory) -> None:
    sim = sim_factory("--tool-call-parser", "mistral", "--reasoning-parser", "qwen3")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        info, model = c.get("/server_info").json(), c.get("/model_info").json()
    assert (info["tool_call_parser"], info["reasoning_parser"]) == ("mistral", "qwen3")
    assert (model["tool_call_parser"], model["reasoning_parser"]) == ("mistral", "qwen3")
    assert "accepts but does not simulate" not in sim.log_text()
