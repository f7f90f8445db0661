r"""Tool calls, and ``--tool-call-parser``: ``message.tool_calls`` instead of text.

Given ``tools`` (and ``tool_choice`` other than "none") the simulated model calls one tool: the one
named by ``tool_choice``, else the one whose name the prompt mentions most ("weather" for
``get_weather``), else the first offered. Its arguments are an instance of the tool's ``parameters``
schema. The model writes the call in the native format of the server's parser (the text SGLang
0.5.23's detector parses):

- ``llama3``: ``<|python_tag|>{"name": ..., "parameters": {...}}``
- ``qwen25`` / ``qwen`` / ``hermes`` (and any other parser, as the simulator's stand-in):
  ``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>``
- ``mistral``: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}]``
- ``deepseekv3``: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json ...``

With the parser the server returns ``tool_calls`` (id ``call_<24 hex>``, ``functions.NAME:i`` for
kimi_k2) and ``finish_reason: "tool_calls"``; without it the call stays in ``content`` as text, as on
real SGLang. ``tool_choice: "required"`` or a named tool constrains the output to a JSON array of
calls, which 0.5.23 parses with or without a parser.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from pytest_sglang.simulator.model.schema_instance import instance
from pytest_sglang.simulator.model.script import CONTENT, MARKUP, TOOL_ARGS, TOOL_HEAD, Script, ToolCallSpec

__all__ = ["add_call", "chosen_tool"]

#: parser -> (head parts, tail parts) around the arguments; a part is (text, is_special_token).
Parts = tuple[tuple[str, bool], ...]
_HERMES: tuple[Parts, Parts] = (
    (("<tool_call>", True), ('\n{"name": "{name}", "arguments": ', False)),
    (("}\n", False), ("</tool_call>", True)),
)
_FORMATS: dict[str, tuple[Parts, Parts]] = {
    "llama3": ((("<|python_tag|>", True), ('{"name": "{name}", "parameters": ', False)), (("}", False),)),
    "mistral": ((("[TOOL_CALLS]", True), (' [{"name": "{name}", "arguments": ', False)), (("}]", False),)),
    "deepseekv3": (
        (
            ("<｜tool▁calls▁begin｜>", True),
            ("<｜tool▁call▁begin｜>", True),
            ("function", False),
            ("<｜tool▁sep｜>", True),
            ("{name}\n```json\n", False),
        ),
        (("\n```", False), ("<｜tool▁call▁end｜>", True), ("<｜tool▁calls▁end｜>", True)),
    ),
}
#: tool_choice "required" / a named tool: 0.5.23 constrains the output to this JSON array.
_JSON_ARRAY: tuple[Parts, Parts] = ((('[{"name": "{name}", "parameters": ', False),), (("}]", False),))


def _function(tool: Any) -> dict[str, Any] | None:
    if isinstance(tool, dict) and isinstance(tool.get("function"), dict) and tool["function"].get("name"):
        fn: dict[str, Any] = tool["function"]
        return fn
    return None


def forced(tool_choice: Any) -> bool:
    """``tool_choice`` "required" or a named function: the output must be a call."""
    return tool_choice == "required" or isinstance(tool_choice, dict)


def chosen_tool(tools: Any, tool_choice: Any, prompt: str) -> dict[str, Any] | None:
    """The function the model calls (``{"name", "parameters"...}``), or None when it answers in text."""
    functions = [fn for fn in (_function(t) for t in tools or []) if fn is not None]
    if not functions or tool_choice == "none":
        return None
    if isinstance(tool_choice, dict):
        named = tool_choice.get("function")
        wanted = named.get("name") if isinstance(named, dict) else None
        return next((fn for fn in functions if fn["name"] == wanted), functions[0])
    words = set(re.findall(r"[a-z0-9]+", prompt[-2000:].lower()))

    def mentions(fn: dict[str, Any]) -> int:  # "weather in Paris?" mentions get_weather
        return sum(len(part) > 3 and part in words for part in re.split(r"[^a-z0-9]+", str(fn["name"]).lower()))

    return max(functions, key=mentions)  # the first offered on a tie


def _call_id(parser: str | None, name: str) -> str:
    if parser == "kimi_k2":
        return f"functions.{name}:0"
    return f"call_{uuid.uuid4().hex[:24]}"


def add_call(script: Script, fn: dict[str, Any], *, parser: str | None, parsed: bool, required: bool) -> None:
    """Append the model's call of ``fn``; ``parsed``: the server turns it into ``tool_calls``."""
    name = str(fn["name"])
    params = fn.get("parameters")
    arguments = json.dumps(instance(params) if isinstance(params, dict) else {}, ensure_ascii=False)
    head, tail = _JSON_ARRAY if required else _FORMATS.get(parser or "", _HERMES)
    for text, special in head:
        script.add(text.replace("{name}", name), TOOL_HEAD if parsed else CONTENT, special=special)
    script.add(arguments, TOOL_ARGS if parsed else CONTENT)
    for text, special in tail:
        script.add(text, MARKUP if parsed else CONTENT, special=special)
    if parsed:
        script.tool_calls.append(ToolCallSpec(name, arguments, _call_id(parser, name)))
