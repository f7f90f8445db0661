"""Tool calls through the server's ``--tool-call-parser``: ``tool_calls``, not text (sglang#17593).

A request that offers tools and asks for one must come back with ``finish_reason`` ``tool_calls``,
calls naming offered tools, and arguments that are a JSON object matching the tool's parameter
schema, in a batch answer and in a stream (where a call arrives in pieces merged by ``index``).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.openai_checks import ask, mode
from pytest_sglang.correctness.payload import as_dict
from pytest_sglang.correctness.result import CheckReport, excerpt

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "the city name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add_numbers", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}},
]
QUESTIONS = ("What is the weather like in Paris right now? Use the get_weather tool.",
             "Please add 17 and 25 using the add_numbers tool.")
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MAX_TOKENS = 256


def merge_deltas(pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed tool-call deltas merged by ``index`` (name once, arguments concatenated)."""
    calls: dict[int, dict[str, Any]] = {}
    for piece in pieces:
        raw_index = piece.get("index")
        index = raw_index if isinstance(raw_index, int) else len(calls)
        call = calls.setdefault(index, {"id": None, "type": None, "function": {"name": None, "arguments": ""}})
        call["id"] = piece.get("id") or call["id"]
        call["type"] = piece.get("type") or call["type"]
        fn = as_dict(piece.get("function"))
        call["function"]["name"] = fn.get("name") or call["function"]["name"]
        call["function"]["arguments"] += fn.get("arguments") or ""
    return [calls[k] for k in sorted(calls)]


def call_problem(call: dict[str, Any]) -> str | None:
    """Why a (merged) tool call is not a valid call of an offered tool, or None."""
    fn = as_dict(call.get("function"))
    name, raw = fn.get("name"), fn.get("arguments")
    if name not in PARAMETERS:
        return f"calls {name!r}, which was not offered ({', '.join(PARAMETERS)})"
    if call.get("type") not in ("function", None):
        return f"has type {call.get('type')!r}, expected 'function'"
    try:
        args = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return f"{name}: arguments {excerpt(raw)} are not JSON"
    if not isinstance(args, dict):
        return f"{name}: arguments {excerpt(raw)} are not a JSON object"
    errors = list(jsonschema.Draft202012Validator(PARAMETERS[name]).iter_errors(args))
    return f"{name}: arguments {excerpt(raw)} violate the schema: {errors[0].message}" if errors else None


def check_tool_calls(ctx: CheckContext, stream: bool, tool_choice: str = "auto") -> CheckReport:
    ctx.features.need_tool_parser()
    report = CheckReport(f"tool calls ({mode(stream)}, parser {ctx.features.tool_call_parser})")
    calls_ok = 0
    for i in range(ctx.settings.samples):
        question = QUESTIONS[i % len(QUESTIONS)]
        body = ctx.body("chat", i, messages=[{"role": "user", "content": question}], tools=TOOLS,
                        tool_choice=tool_choice, max_tokens=MAX_TOKENS)
        a = ask(ctx, "chat", body, stream=stream)
        report.problems += [f"request {i}: {p}" for p in a.problems]
        c = a.choice(0)
        calls = merge_deltas(c.tool_calls) if stream else c.tool_calls
        if not calls:
            report.problems.append(f"request {i}: no tool_calls; finish_reason {c.finish_reason!r}, content "
                                   f"{excerpt(c.text)} (a call left in the text means the parser did not run)")
            continue
        report.expect(c.finish_reason == "tool_calls", f"request {i}: finish_reason {c.finish_reason!r} with "
                                                       f"{len(calls)} tool call(s), expected 'tool_calls'")
        problems = [p for p in map(call_problem, calls) if p]
        report.problems += [f"request {i}: tool call {p}" for p in problems]
        calls_ok += not problems
    report.figures.update({"requests": ctx.settings.samples, "valid calls": calls_ok})
    return report
