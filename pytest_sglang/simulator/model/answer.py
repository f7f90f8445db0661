"""What the simulated model answers: the :class:`~pytest_sglang.simulator.model.script.Script` of a request.

In order of precedence: a grammar (``json_schema``/``regex``/``ebnf``) fixes the output; offered
tools get a call; a reasoning model thinks first; an arithmetic question gets its worked answer
(see :mod:`~pytest_sglang.simulator.model.arithmetic`). Any other prompt gets no script: the engine writes
its deterministic filler words, as before. The correctness faults act here: ``wrong-answer``,
``json-schema-violation``, ``tool-call-as-text``, ``reasoning-in-content``.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pytest_sglang.images import COLOURS
from pytest_sglang.simulator.failures.faults import Faults
from pytest_sglang.simulator.model import arithmetic, reasoning, toolcalls
from pytest_sglang.simulator.model.schema_instance import dumps, violate
from pytest_sglang.simulator.model.script import Script
from pytest_sglang.simulator.model.serving import Parsers

__all__ = ["Ask", "Parsers", "plan"]

_AFTER_THINKING = "Here is my answer."


@dataclass(frozen=True)
class Ask:
    """A request as the model sees it."""

    prompt: str
    chat: bool = False
    #: the grammar's instance: ("json", value) or ("text", str), compiled by :mod:`.grammar`
    constrained: tuple[str, Any] | None = None
    #: the JSON schema of a json constraint (the violation fault breaks the value against it)
    schema: dict[str, Any] = field(default_factory=dict)
    tools: Any = None
    tool_choice: Any = "auto"
    thinking: bool = False
    separate_reasoning: bool = True
    #: what the model sees in each image sent (its dominant colour); None: no image reached it
    sees: tuple[str | None, ...] | None = None


def _draw(prompt: str, salt: str) -> float:
    """A per-prompt draw in [0, 1): the same prompt always gets the same (wrong or right) answer."""
    return zlib.crc32(f"{salt}:{prompt}".encode()) / 2**32


def _constrained(ask: Ask, faults: Faults) -> Script:
    script = Script()
    assert ask.constrained is not None
    kind, value = ask.constrained
    if kind == "json":
        if faults.json_schema_violation:
            value = violate(ask.schema, value)
        script.add(dumps(value))
    else:
        script.add(str(value))
    return script


_COLOUR_QUESTION = re.compile(r"\bcolou?rs?\b", re.IGNORECASE)
_IMAGE_WORD = re.compile(r"\b(image|picture|photo)s?\b", re.IGNORECASE)
#: A colour the text itself states ("... is red."): a language model repeats it (the checks' text-only control).
_STATED_COLOUR = re.compile(r"\bis (" + "|".join(COLOURS) + r")\b", re.IGNORECASE)


def _vision_answer(ask: Ask) -> str | None:
    """Asked for the colour of the images: the colour of each, in order (or that there is none to see)."""
    if not _COLOUR_QUESTION.search(ask.prompt):
        return None
    if ask.sees is None:
        if _IMAGE_WORD.search(ask.prompt):
            return "I cannot see any image in your message."
        stated = _STATED_COLOUR.search(ask.prompt)
        return stated.group(1).capitalize() + "." if stated else None
    names = [colour or "unclear" for colour in ask.sees]
    return ", ".join(names).capitalize() + "."


def _answer(ask: Ask, faults: Faults) -> str | None:
    seen = _vision_answer(ask)
    if seen is not None:
        return seen if ask.chat else " " + seen
    question = arithmetic.last_question(ask.prompt)
    if question is None:
        return None
    value = question.value
    if faults.wrong_answer and _draw(ask.prompt, "wrong-answer") < faults.wrong_answer:
        value += Fraction(1 + zlib.crc32(ask.prompt.encode()) % 9)
    text = arithmetic.solution(question, value)
    return text if ask.chat else " " + text  # a completion continues "Answer:" after a space


def plan(ask: Ask, parsers: Parsers, faults: Faults) -> Script | None:
    """The model's output for ``ask`` on a server with ``parsers``; None: free filler text."""
    if ask.constrained is not None:
        return _constrained(ask, faults)
    fn = toolcalls.chosen_tool(ask.tools, ask.tool_choice, ask.prompt) if ask.chat else None
    if fn is not None:
        required = toolcalls.forced(ask.tool_choice)
        script = Script()
        parsed = (parsers.tool_call is not None or required) and not faults.tool_call_as_text
        toolcalls.add_call(script, fn, parser=parsers.tool_call, parsed=parsed, required=required)
        return script
    text = _answer(ask, faults)
    if not (ask.chat and ask.thinking):
        if text is None:
            return None
        script = Script()
        script.add(text)
        return script
    script = Script()
    parsed = parsers.reasoning is not None and ask.separate_reasoning and not faults.reasoning_in_content
    reasoning.add_thinking(script, parsed=parsed, counted=parsers.reasoning is not None)
    script.add(text if text is not None else _AFTER_THINKING)
    return script
