"""Thinking, and ``--reasoning-parser``: ``reasoning_content`` apart from ``content``.

The simulated model is a reasoning model when the server runs with ``--reasoning-parser``: on
``/v1/chat/completions`` it writes ``<think>...</think>`` before its answer, unless the request turns
thinking off (``chat_template_kwargs: {"enable_thinking": false}``, as Qwen3's template reads it).
A request may also turn thinking on without a parser; then, as on real SGLang, the think text stays
inside ``content``. With the parser (and ``separate_reasoning``, default true) the server strips the
tags and moves the thoughts to ``reasoning_content``, batch and stream.
"""

from __future__ import annotations

from typing import Any

from pytest_sglang.simulator.model.script import CONTENT, MARKUP, REASONING, Script

__all__ = ["add_thinking", "thinks"]

_THOUGHT = "Let me work through the question step by step before I answer."


def thinks(body: dict[str, Any], reasoning_parser: str | None) -> bool:
    """Whether the model thinks before answering this chat request."""
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("enable_thinking", "thinking"):
            if key in kwargs:
                return bool(kwargs[key])
    return reasoning_parser is not None


def add_thinking(script: Script, *, parsed: bool, counted: bool) -> None:
    """Append ``<think>thoughts</think>``; ``parsed``: the server routes it to ``reasoning_content``.

    ``counted``: the server knows the think-end token (a reasoning parser is set), so
    ``reasoning_tokens`` counts the block, even when the parser fails to split it.
    """
    script.add("<think>", MARKUP if parsed else CONTENT, special=True)
    script.add(_THOUGHT, REASONING if parsed else CONTENT)
    script.add("</think>", MARKUP if parsed else CONTENT, special=True)
    if counted:
        script.reasoning_tokens = len(script)
