"""What the simulated model writes for one request, token by token, and how the server reads it.

A :class:`Script` is the model's output before EOS (an arithmetic answer, a JSON instance, a tool
call, thinking then an answer). Each token carries the *channel* the server's parsers route it to
when they are configured: plain content, reasoning (``reasoning_content``), markup the parsers
drop (``<think>``, tool-call tags), or a tool call's head and arguments. Without the parser (or under
the ``tool-call-as-text`` / ``reasoning-in-content`` faults) every token is plain content, which is
exactly what a client of a misconfigured server sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang.simulator import tokenizer

__all__ = ["CONTENT", "MARKUP", "REASONING", "TOOL_ARGS", "TOOL_HEAD", "Script", "ToolCallSpec"]

CONTENT, REASONING, MARKUP, TOOL_HEAD, TOOL_ARGS = range(5)


@dataclass(frozen=True)
class ToolCallSpec:
    """One call the model makes: the tool's name, its arguments (JSON text) and the call id."""

    name: str
    arguments: str
    call_id: str


class Script:
    """Tokens ``(id, text)`` with their channels; ``routed`` is false when everything is content."""

    __slots__ = ("channels", "reasoning_tokens", "routed", "tokens", "tool_calls")

    def __init__(self) -> None:
        self.tokens: list[tuple[int, str]] = []
        self.channels: list[int] = []
        self.tool_calls: list[ToolCallSpec] = []
        #: tokens up to and including ``</think>`` (0.5.23 counts them when a reasoning parser is set)
        self.reasoning_tokens = 0
        self.routed = False

    def add(self, text: str, channel: int = CONTENT, *, special: bool = False) -> None:
        toks = tokenizer.pieces(text, special=special)
        self.tokens += toks
        self.channels += [channel] * len(toks)
        if channel != CONTENT:
            self.routed = True

    def channel(self, k: int) -> int:
        """The channel of output token ``k`` (tokens past the script, e.g. with ignore_eos: content)."""
        return self.channels[k] if k < len(self.channels) else CONTENT

    def __len__(self) -> int:
        return len(self.tokens)
