"""Structured output: ``response_format`` json_schema/json_object, ``regex``, ``ebnf``, and their errors."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema
import pytest

from pytest_sglang.simulator.model.ebnf_instance import ebnf_instance
from pytest_sglang.simulator.model.regex_instance import GrammarError, regex_instance
from pytest_sglang.simulator.model.schema_instance import check_supported, instance
from tests.conftest import SimFactory
from tests.simulator.sse import TOOLS, chat, deltas, events

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1},
        "address": {"$ref": "#/$defs/address"},
        "score": {"anyOf": [{"type": "number", "exclusiveMinimum": 0.5}, {"type": "null"}]},
    },
    "required": ["name", "age", "address"],
    "additionalProperties": False,
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["zip"],
        }
    },
}


@pytest.mark.parametrize(
    "schema",
    [
        PERSON,
        {"type": "array", "items": {"type": "integer"}, "minItems": 3},
        {"const": 7},
        {"type": ["null", "boolean"]},
    ],
)
def test_schema_instances_validate(schema: dict[str, Any]) -> None:
    jsonschema.validate(instance(schema), schema)


@pytest.mark.parametrize(
    "pattern",
    ["(yes|no)", "[0-9]{3}-[0-9]{4}", r"\w+@\w+\.com", "[^a-z]x?", "(?:ab|cd)+e{2,3}", r"[A-Z][a-z]*( [A-Z]\.)?"],
)
def test_regex_instances_match(pattern: str) -> None:
    assert re.fullmatch(pattern, regex_instance(pattern))


@pytest.mark.parametrize(
    ("grammar", "sentence"),
    [
        ('root ::= "yes" | "no"', "yes"),
        ('root ::= "(" root ")" | "x"', "((x))"),
        ('root ::= num ("," num)*\nnum ::= [1-9] [0-9]*', "1"),
        ('root ::= "a"{3} # three', "aaa"),
    ],
)
def test_ebnf_sentences(grammar: str, sentence: str) -> None:
    assert ebnf_instance(grammar) == sentence


@pytest.mark.parametrize(
    ("compile_", "source", "text"),
    [  # the texts xgrammar 0.2.7 gives (recorded), minus its "[HH:MM:SS] /project/cpp/..." prefix
        (regex_instance, "(a", "Regex parsing error at position 3: The parenthesis is not closed."),
        (regex_instance, "[abc", "Regex parsing error at position 5: Unclosed '['"),
        (
            regex_instance,
            "a**",
            "Regex parsing error at position 3: Two consecutive repetition modifiers are not allowed.",
        ),
        (ebnf_instance, "root ::= ", "EBNF parser error at line 1, column 10: Expect element, but got "),
        (ebnf_instance, 'root ::= "a" | b', 'EBNF parser error at line 1, column 16: Rule "b" is not defined'),
        (
            ebnf_instance,
            'foo ::= "a"',
            'EBNF parser error at line 1, column 1: The root rule with name "root" is not found',
        ),
    ],
)
def test_grammar_errors_carry_xgrammar_text(compile_: Any, source: str, text: str) -> None:
    with pytest.raises(GrammarError) as err:
        compile_(source)
    assert str(err.value).endswith(f": {text}\n")


def test_unsupported_schema_keywords_are_refused_like_xgrammar() -> None:
    assert check_supported({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}}) == (
        "JSON Schema at #/properties/a is not supported by xgrammar: keyword(s) multipleOf would be ignored"
    )
    assert check_supported(PERSON) is None


def _schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}


def test_structured_output_on_every_route(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        batch = chat(c, "Tell me about Ann", response_format=_schema_format(PERSON), max_tokens=200)
        stream = events(
            c,
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "Ann"}],
                "response_format": _schema_format(PERSON),
                "max_tokens": 200,
            },
        )
        compl = c.post(
            "/v1/completions", json={"prompt": "Ann:", "max_tokens": 200, "response_format": _schema_format(PERSON)}
        ).json()
        native = c.post(
            "/generate",
            json={"text": "Ann", "sampling_params": {"max_new_tokens": 200, "json_schema": json.dumps(PERSON)}},
        ).json()
        obj = chat(c, "anything", response_format={"type": "json_object"})
        rx = chat(c, "phone?", regex=r"[0-9]{3}-[0-9]{4}")
        eb = chat(c, "ok?", ebnf='root ::= "yes" | "no"')
        info = c.get("/server_info").json()
    assert batch["choices"][0]["finish_reason"] == "stop"
    for text in (
        batch["choices"][0]["message"]["content"],
        "".join(deltas(stream, "content")),
        compl["choices"][0]["text"],
        native["text"],
    ):
        jsonschema.validate(json.loads(text), PERSON)
    assert isinstance(json.loads(obj["choices"][0]["message"]["content"]), dict)
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", rx["choices"][0]["message"]["content"])
    assert eb["choices"][0]["message"]["content"] == "yes"
    assert info["grammar_backend"] == "xgrammar"  # 0.5.23's default, reported as real SGLang does


def test_grammar_errors_are_sglang_400s(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    msg = [{"role": "user", "content": "hi"}]
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        both = c.post("/v1/chat/completions", json={"messages": msg, "regex": "a", "ebnf": 'root ::= "a"'})
        no_schema = c.post("/v1/chat/completions", json={"messages": msg, "response_format": {"type": "json_schema"}})
        kind = c.post("/v1/chat/completions", json={"messages": msg, "response_format": {"type": "regex"}})
        bad_rx = c.post("/v1/chat/completions", json={"messages": msg, "regex": "(a"})
        streamed = events(c, "/v1/chat/completions", {"messages": msg, "regex": "(a"})
        unsupported = c.post(
            "/v1/chat/completions",
            json={
                "messages": msg,
                "response_format": _schema_format(
                    {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}}
                ),
            },
        )
        native = c.post("/generate", json={"text": "hi", "sampling_params": {"json_schema": "{not json"}})
        tool_and_grammar = c.post(
            "/v1/chat/completions", json={"messages": msg, "regex": "a", "tools": TOOLS, "tool_choice": "required"}
        )
    assert (both.status_code, both.json()["message"]) == (
        400,
        "Only one of json_schema, regex, ebnf, or structural_tag can be set.",
    )
    assert no_schema.json()["message"] == "schema_ is required for json_schema response format request."
    assert kind.status_code == 400 and kind.json()["type"] == "Bad Request"
    assert kind.json()["message"].startswith("6 validation errors:\n  {'type': 'literal_error'")
    assert bad_rx.status_code == 400 and bad_rx.json()["type"] == "BadRequestError"
    assert bad_rx.json()["message"].startswith("Failed to compile regex grammar: [")
    assert "Regex parsing error at position 3: The parenthesis is not closed." in bad_rx.json()["message"]
    # compiled by the scheduler, after the stream started: in-band error, then [DONE]
    assert streamed[0]["error"]["code"] == 400 and streamed[0]["error"]["type"] == "BAD_REQUEST"
    assert streamed[1:] == ["[DONE]"]
    assert unsupported.json()["message"] == (
        "Failed to compile json grammar: JSON Schema at #/properties/a is not "
        "supported by xgrammar: keyword(s) multipleOf would be ignored"
    )
    assert tool_and_grammar.status_code == 400
    assert tool_and_grammar.json()["message"].startswith("tool_choice 'required' or a named tool cannot be combined")
    assert native.status_code == 400 and native.json() == {
        "error": {
            "message": (
                "Failed to compile json grammar: "  # Python's json error, as 0.5.23 passes it on
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
            )
        }
    }


def test_grammar_backend_none_refuses_grammars(sim_factory: SimFactory) -> None:
    sim = sim_factory("--grammar-backend", "none")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "regex": "a+"})
        info = c.get("/server_info").json()
    assert r.status_code == 400 and "not supported when the server is launched with --grammar-backend none" in r.text
    assert info["grammar_backend"] == "none"
